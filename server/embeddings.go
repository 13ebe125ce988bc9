package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"

	"github.com/gorun-dev/gorun/llm"
)

// embeddingRequest is OpenAI's POST /v1/embeddings body.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

// maxEmbedInputs bounds the inputs of one request (OpenAI's limit).
const maxEmbedInputs = 2048

// embeddings is OpenAI's POST /v1/embeddings: one embedding per input, the final hidden states
// pooled as the server's Config.Pooling says and normalized to unit length (as OpenAI's are).
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	base64Out, e := s.embeddingChecks(&req)
	var seqs [][]int32
	if e == nil {
		seqs, e = s.embeddingInputs(req.Input, "input")
	}
	if e != nil {
		writeError(w, e)
		return
	}
	vecs, ntok, ae := s.embed(r.Context(), seqs, llm.NormalizeEuclidean)
	if ae != nil {
		if ae.Status != statusClientGone {
			writeError(w, ae)
		}
		return
	}
	resp := embeddingResponse{Object: "list", Model: s.name, Data: make([]embeddingData, len(vecs)),
		Usage: embeddingUsage{PromptTokens: ntok, TotalTokens: ntok}}
	for i, v := range vecs {
		resp.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if base64Out {
			resp.Data[i].Embedding = float32Base64(v)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// embeddingChecks validates encoding_format (reporting base64) and dimensions (only the
// model's own width: gorun does not shorten embeddings).
func (s *Server) embeddingChecks(req *embeddingRequest) (base64Out bool, e *apiError) {
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		base64Out = true
	default:
		return false, badRequest("encoding_format", "encoding_format = %s (want float or base64)", quote(req.EncodingFormat))
	}
	if d := req.Dimensions; d != nil && *d != s.model.Hparams().NEmbd {
		return false, badRequest("dimensions", "dimensions = %d: this model's embeddings have %d (gorun does not shorten them)", *d, s.model.Hparams().NEmbd)
	}
	return base64Out, nil
}

// embeddingInputs reads input: a string, an array of strings, an array of token ids, or an
// array of token-id arrays (OpenAI's four forms), tokenized as llama-embedding does (BOS and
// EOS as the file asks). Each input must have tokens and fit the context.
func (s *Server) embeddingInputs(raw json.RawMessage, param string) ([][]int32, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(param, "%s is required", param)
	}
	// Each form is tried in a variable of its own: a failed Unmarshal leaves what it could
	// decode in its destination.
	var one string
	var manyTexts, texts []string
	var oneIDs []int32
	var manyIDs, seqs [][]int32
	switch {
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(raw, &manyTexts) == nil && len(manyTexts) > 0:
		texts = manyTexts
	case json.Unmarshal(raw, &oneIDs) == nil && len(oneIDs) > 0:
		seqs = [][]int32{oneIDs}
	case json.Unmarshal(raw, &manyIDs) == nil && len(manyIDs) > 0:
		seqs = manyIDs
	default:
		return nil, badRequest(param, "%s must be a string, an array of token ids, or a non-empty array of those", param)
	}
	if n := max(len(texts), len(seqs)); n > maxEmbedInputs {
		return nil, badRequest(param, "%d inputs (at most %d)", n, maxEmbedInputs)
	}
	for _, t := range texts {
		seqs = append(seqs, s.model.Tokenize(t, true))
	}
	V := int32(s.model.Tokenizer().VocabSize())
	for i, p := range seqs {
		if len(p) == 0 {
			return nil, badRequest(param, "%s[%d] is empty (it has no tokens)", param, i)
		}
		if len(p) > s.model.ContextLength() {
			return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
				Message: "input " + itoa(i) + " has " + itoa(len(p)) + " tokens and the context holds " + itoa(s.model.ContextLength())}
		}
		for _, id := range p {
			if id < 0 || id >= V {
				return nil, badRequest(param, "%s[%d]: token id %d is outside the vocabulary of %d", param, i, id, V)
			}
		}
	}
	return seqs, nil
}

// embed computes the embeddings of seqs in one slot, stopping between inputs and batches when
// ctx ends (the client left). It returns them and their token count.
func (s *Server) embed(ctx context.Context, seqs [][]int32, normalize int) ([][]float32, int, *apiError) {
	sl, ae := s.acquire(ctx, nil)
	if ae != nil {
		return nil, 0, ae
	}
	defer s.pool.release(sl)
	opts := llm.EmbedOptions{Pooling: s.cfg.Pooling, Normalize: normalize}
	out := make([][]float32, len(seqs))
	ntok := 0
	for i, toks := range seqs {
		v, err := sl.sess.Embed(ctx, toks, opts)
		if err != nil {
			return nil, 0, ctxError(ctx, err)
		}
		out[i] = v
		ntok += len(toks)
	}
	return out, ntok, nil
}

// float32Base64 is OpenAI's base64 encoding of an embedding: its float32s, little-endian.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
