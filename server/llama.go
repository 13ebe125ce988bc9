package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/gorun-dev/gorun/llm"
)

// llama-server's own endpoints: /tokenize, /detokenize, /completion.

type tokenizeRequest struct {
	Content    *string `json:"content"`
	AddSpecial bool    `json:"add_special"` // GPT-2 adds no special tokens: accepted, no effect
	ParseSpec  *bool   `json:"parse_special"`
	WithPieces bool    `json:"with_pieces"`
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Content == nil {
		writeError(w, badRequest("content", "content (the text to tokenize) is required"))
		return
	}
	tok := s.model.Tokenizer()
	var ids []int32
	if req.ParseSpec != nil && !*req.ParseSpec {
		ids = tok.EncodeOrdinary(*req.Content)
	} else {
		ids = tok.Encode(*req.Content)
	}
	limit := s.maxResponse()
	if !req.WithPieces {
		size := len(`{"tokens":[]}`)
		for _, id := range ids {
			size += len(strconv.Itoa(int(id))) + 1
		}
		if size > limit {
			writeError(w, responseTooLarge("content", "the tokens of the text", size, limit))
			return
		}
		if ids == nil {
			ids = []int32{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	// Encoded piece by piece, to stop at the limit before the response is all made: each
	// token's piece can be many times the bytes of its text.
	type piece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"` // a string, or the bytes when they are not valid UTF-8
	}
	b := append(make([]byte, 0, 1024), `{"tokens":[`...)
	for i, id := range ids {
		tb := tok.TokenBytes(id)
		p := piece{ID: id, Piece: string(tb)}
		if !utf8.Valid(tb) {
			ints := make([]int, len(tb))
			for j, c := range tb {
				ints[j] = int(c)
			}
			p.Piece = ints
		}
		pb, _ := json.Marshal(p) // ints and strings: it cannot fail
		if i > 0 {
			b = append(b, ',')
		}
		if b = append(b, pb...); len(b) > limit {
			writeError(w, responseTooLarge("content", "the pieces of the text", len(b), limit))
			return
		}
	}
	writeBody(w, http.StatusOK, append(b, "]}\n"...))
}

// maxResponse bounds the answers of /tokenize and /detokenize: twice the largest request
// body, so that a request cannot make the server build and send many times its size.
func (s *Server) maxResponse() int {
	return int(min(2*s.cfg.MaxBodyBytes, math.MaxInt32))
}

func responseTooLarge(param, what string, size, limit int) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "response_too_large",
		Message: fmt.Sprintf("%s would take about %d bytes of JSON, over the limit of %d (twice the largest request body): send less at a time", what, size, limit)}
}

// jsonStringSize bounds the size of s encoded as a JSON string by encoding/json, which
// escapes <, > and & as \u003c..., and an invalid byte as \ufffd (exact but for \b, \f and
// a real U+FFFD, counted as six bytes).
func jsonStringSize(s string) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == utf8.RuneError || r == 0x2028 || r == 0x2029:
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tokens []int32 `json:"tokens"`
	}
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	tok := s.model.Tokenizer()
	V := int32(tok.VocabSize())
	limit := s.maxResponse()
	size := 0 // the text's bytes: checked before decoding it
	for _, id := range req.Tokens {
		if id < 0 || id >= V {
			writeError(w, badRequest("tokens", "token id %d is outside the vocabulary of %d", id, V))
			return
		}
		if size += len(tok.TokenBytes(id)); size > limit {
			writeError(w, responseTooLarge("tokens", "the text of the tokens", size, limit))
			return
		}
	}
	text := tok.Decode(req.Tokens)
	if size := jsonStringSize(text); size > limit {
		writeError(w, responseTooLarge("tokens", "the text of the tokens", size, limit))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": text})
}

// llamaCompletionRequest is llama-server's POST /completion body (the options gorun has).
type llamaCompletionRequest struct {
	Model       string          `json:"model"`
	Prompt      json.RawMessage `json:"prompt"`
	NPredict    *int            `json:"n_predict"`
	Stream      bool            `json:"stream"`
	CachePrompt *bool           `json:"cache_prompt"` // prompts are always cached per slot
	NProbs      int             `json:"n_probs"`
	sampling
}

type llamaTimings struct {
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

type llamaCompletionResponse struct {
	Index           int           `json:"index"`
	Content         string        `json:"content"`
	Tokens          []int32       `json:"tokens"`
	Stop            bool          `json:"stop"`
	Model           string        `json:"model,omitempty"`
	TokensPredicted int           `json:"tokens_predicted"`
	TokensEvaluated int           `json:"tokens_evaluated"`
	TokensCached    int           `json:"tokens_cached"`
	StopType        string        `json:"stop_type,omitempty"`
	StoppingWord    string        `json:"stopping_word"`
	Truncated       bool          `json:"truncated"`
	Timings         *llamaTimings `json:"timings,omitempty"`
}

func (s *Server) llamaCompletion(w http.ResponseWriter, r *http.Request) {
	var req llamaCompletionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	prompts, _, e := s.parsePrompt(req.Prompt, false)
	var maxTok int
	if e == nil {
		maxTok, e = s.maxTokens("n_predict", req.NPredict, true)
	}
	if e == nil && req.NProbs != 0 {
		e = badRequest("n_probs", "n_probs (top alternatives) is not supported")
	}
	var opts llm.GenerateOptions
	if e == nil {
		opts, e = req.options(maxTok, s.model.Tokenizer().VocabSize())
	}
	if e != nil {
		writeError(w, e)
		return
	}
	sl, ae := s.acquire(r.Context(), prompts[0])
	if ae != nil {
		if ae.Status != statusClientGone {
			writeError(w, ae)
		}
		return
	}
	sl.fresh = !req.reusePrefix()
	release := s.pool.hold(sl)
	defer release()
	var stream *sse
	if req.Stream {
		stream = newSSE(w)
	}
	var content []byte
	var tokens []int32
	st, promptTime, ae := s.generate(r.Context(), sl, prompts[0], opts, nil, func(p llm.Piece) error {
		if p.Token >= 0 {
			tokens = append(tokens, p.Token)
		}
		if stream != nil {
			if p.Text == "" {
				return nil
			}
			toks := []int32{}
			if p.Token >= 0 {
				toks = []int32{p.Token}
			}
			return stream.send(llamaCompletionResponse{Content: p.Text, Tokens: toks, TokensPredicted: len(tokens), TokensEvaluated: len(prompts[0])})
		}
		content = append(content, p.Text...)
		return nil
	})
	if ae != nil {
		if stream != nil {
			stream.fail(ae)
		} else if ae.Status != statusClientGone {
			writeError(w, ae)
		}
		return
	}
	res := llamaCompletionResponse{Content: string(content), Tokens: tokens, Stop: true, Model: s.name,
		TokensPredicted: st.Tokens, TokensEvaluated: st.PromptTokens, TokensCached: int(sl.cached.Load()), StoppingWord: st.StopString}
	release() // generation is over: the slot is not held while the answer is written
	if res.Tokens == nil {
		res.Tokens = []int32{}
	}
	switch st.Stop {
	case llm.StopEOS, llm.StopGrammar: // llama-server ends a completed grammar with its EOS
		res.StopType = "eos"
	case llm.StopString:
		res.StopType = "word"
	default:
		res.StopType = "limit"
	}
	t := &llamaTimings{PromptN: st.PromptTokens, PromptMS: ms(promptTime.Seconds()), PredictedN: st.Tokens, PredictedMS: ms(st.GenTime.Seconds())}
	if t.PromptN > 0 && t.PromptMS > 0 {
		t.PromptPerTokenMS, t.PromptPerSecond = t.PromptMS/float64(t.PromptN), 1e3*float64(t.PromptN)/t.PromptMS
	}
	if t.PredictedN > 0 && t.PredictedMS > 0 {
		t.PredictedPerTokenMS, t.PredictedPerSecond = t.PredictedMS/float64(t.PredictedN), 1e3*float64(t.PredictedN)/t.PredictedMS
	}
	res.Timings = t
	if stream != nil {
		res.Content = ""
		res.Tokens = []int32{}
		stream.send(res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func ms(sec float64) float64 { return sec * 1e3 }
