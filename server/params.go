package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"sync"

	"github.com/gorun-dev/gorun/grammar"
	"github.com/gorun-dev/gorun/llm"
)

// sampling are the generation parameters the completion endpoints share (OpenAI's names,
// with llama-server's extensions top_k, min_p, repeat_penalty, repeat_last_n, ignore_eos).
type sampling struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	RepeatPenalty    *float64           `json:"repeat_penalty"`
	RepeatLastN      *int               `json:"repeat_last_n"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	Stop             json.RawMessage    `json:"stop"`
	IgnoreEOS        bool               `json:"ignore_eos"`
	// CachePrompt false makes the request evaluate its whole prompt instead of reusing the
	// prefix its slot's cache holds (llama-server's cache_prompt; default true).
	CachePrompt *bool `json:"cache_prompt"`
	// Constrained output: OpenAI's response_format, and llama-server's grammar (GBNF) and
	// json_schema; at most one of them.
	ResponseFormat json.RawMessage `json:"response_format"`
	Grammar        *string         `json:"grammar"`
	JSONSchema     json.RawMessage `json:"json_schema"`
}

// reusePrefix reports whether the request may reuse its slot's cached prefix.
func (p *sampling) reusePrefix() bool { return p.CachePrompt == nil || *p.CachePrompt }

// maxStops bounds the stop strings of a request.
const maxStops = 16

// options validates the parameters and converts them to the library's. Parameters left out
// take llama.cpp's defaults (llm.DefaultSampling: temperature 0.8, top_k 40, top_p 0.95, min_p
// 0.05, no repetition penalty, a random seed), as llama-server does; a value given means what
// it means to the library and the gorun command (0 turns top_k, min_p, repeat_last_n off; -1
// is the whole context, or a random seed). maxTokens < 0 is llm.NoLimit.
func (p *sampling) options(maxTokens, vocab int) (llm.GenerateOptions, *apiError) {
	o, e := p.libOptions(maxTokens)
	if e != nil {
		return o, e
	}
	if o.Sample.Grammar, e = p.grammar(); e != nil {
		return o, e
	}
	return o, p.penaltiesAndBias(&o.Sample, vocab)
}

// penaltiesAndBias sets OpenAI's presence and frequency penalties (counting the generated
// tokens only, as OpenAI defines them) and validates the logit bias (token ids as strings,
// values in [-100, 100], as OpenAI takes them; -100 bans the token).
func (p *sampling) penaltiesAndBias(so *llm.SampleOptions, vocab int) *apiError {
	if p.PresencePenalty != nil {
		so.PresencePenalty = float32(*p.PresencePenalty)
	}
	if p.FrequencyPenalty != nil {
		so.FrequencyPenalty = float32(*p.FrequencyPenalty)
	}
	so.PenalizeGenerated = true
	if len(p.LogitBias) > 1024 {
		return badRequest("logit_bias", "logit_bias has %d entries (at most 1024)", len(p.LogitBias))
	}
	if e := checkBiasKeys(p.LogitBias, vocab); e != nil {
		return e
	}
	for k, v := range p.LogitBias {
		id, _ := canonicalID(k, vocab)
		if math.IsNaN(v) || v < -100 || v > 100 {
			return badRequest("logit_bias", "logit_bias[%s] = %v is outside [-100, 100]", quote(k), v)
		}
		if so.LogitBias == nil {
			so.LogitBias = map[int32]float32{}
		}
		b := float32(v)
		if v <= -100 {
			b = float32(math.Inf(-1))
		}
		so.LogitBias[int32(id)] = b
	}
	return nil
}

// checkBiasKeys accepts logit_bias keys that are token ids written as OpenAI's tokenizer
// writes them: decimal digits, no sign, spaces or leading zero ("+5", " 5 " and "05" would
// each be a second spelling of token 5).
func checkBiasKeys(bias map[string]float64, vocab int) *apiError {
	for k := range bias {
		if _, ok := canonicalID(k, vocab); !ok {
			return badRequest("logit_bias", "logit_bias key %s is not a token id of the vocabulary of %d (decimal digits, no sign, spaces or leading zero)", quote(k), vocab)
		}
	}
	return nil
}

// canonicalID reads a token id in canonical decimal, below vocab.
func canonicalID(k string, vocab int) (int, bool) {
	if k == "" || len(k) > 10 || len(k) > 1 && k[0] == '0' {
		return 0, false
	}
	id := 0
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return 0, false
		}
		id = id*10 + int(k[i]-'0') // at most 10 digits: no overflow
	}
	return id, id < vocab
}

func (p *sampling) libOptions(maxTokens int) (llm.GenerateOptions, *apiError) {
	o := llm.GenerateOptions{MaxTokens: maxTokens, IgnoreEOS: p.IgnoreEOS}
	if maxTokens < 0 {
		o.MaxTokens = llm.NoLimit
	}
	o.Sample = llm.DefaultSampling()
	so := &o.Sample
	finite := func(name string, v *float64, lo, hi float64) *apiError {
		if v != nil && (math.IsNaN(*v) || *v < lo || *v > hi) {
			return badRequest(name, "%s = %v is outside [%v, %v]", name, *v, lo, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
	}{
		{"temperature", p.Temperature, 0, 2},
		{"top_p", p.TopP, 0, 1},
		{"min_p", p.MinP, 0, 1},
		{"repeat_penalty", p.RepeatPenalty, 1e-6, 100},
		{"presence_penalty", p.PresencePenalty, -2, 2},
		{"frequency_penalty", p.FrequencyPenalty, -2, 2},
	} {
		if e := finite(c.name, c.v, c.lo, c.hi); e != nil {
			return o, e
		}
	}
	if p.Temperature != nil {
		so.Temperature = float32(*p.Temperature)
	}
	if p.TopP != nil {
		so.TopP = float32(*p.TopP)
		if so.TopP == 0 {
			// OpenAI's and llama-server's top_p 0 keeps only the most likely token (after the
			// bias and the penalties): greedy decoding. The library's TopP 0 is off.
			so.Temperature = 0
		}
	}
	if p.TopK != nil {
		if *p.TopK < 0 {
			return o, badRequest("top_k", "top_k = %d is negative (0 turns it off)", *p.TopK)
		}
		so.TopK = *p.TopK
	}
	if p.MinP != nil {
		so.MinP = float32(*p.MinP)
	}
	if p.RepeatPenalty != nil {
		so.RepeatPenalty = float32(*p.RepeatPenalty)
	}
	if p.RepeatLastN != nil {
		if *p.RepeatLastN < llm.WholeContext {
			return o, badRequest("repeat_last_n", "repeat_last_n = %d (want -1 for the whole context, 0 for off, or a count)", *p.RepeatLastN)
		}
		so.RepeatLastN = *p.RepeatLastN
	}
	if p.Seed != nil {
		switch {
		case *p.Seed == -1: // random, as llama-server's default
		case *p.Seed < 0:
			return o, badRequest("seed", "seed = %d (want -1 for a random seed, or a seed >= 0)", *p.Seed)
		default:
			so.Seed = uint64(*p.Seed)
		}
	}
	stops, e := parseStop(p.Stop)
	if e != nil {
		return o, e
	}
	o.Stop = stops
	if err := so.Validate(); err != nil {
		return o, badRequest("", "%v", err)
	}
	return o, nil
}

// parseStop reads stop: null, a string, or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var stops []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		stops = []string{one}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(stops) > maxStops {
		return nil, badRequest("stop", "%d stop strings (at most %d)", len(stops), maxStops)
	}
	for _, s := range stops {
		if s == "" {
			return nil, badRequest("stop", "stop strings must not be empty")
		}
	}
	return stops, nil
}

// maxTokens resolves a request's token limit: absent takes the server's default; 0 generates
// nothing; negative is refused (llamaStyle accepts -1, until the context is full).
func (s *Server) maxTokens(name string, v *int, llamaStyle bool) (int, *apiError) {
	switch {
	case v == nil:
		return s.cfg.DefaultMaxTokens, nil
	case *v == -1 && llamaStyle:
		return llm.NoLimit, nil
	case *v < 0:
		return 0, badRequest(name, "%s = %d is negative", name, *v)
	}
	return *v, nil
}

// choiceCount checks n against the number of prompts (at least 1): n times it must be at
// most MaxChoices, compared by division, as the product of client counts can overflow.
func (s *Server) choiceCount(n *int, prompts int) (int, *apiError) {
	k := 1
	if n != nil {
		k = *n
	}
	if k < 1 || prompts < 1 || k > s.cfg.MaxChoices/prompts {
		return 0, badRequest("n", "n = %d with %d prompt(s): want 1 to %d choices in all", k, prompts, s.cfg.MaxChoices)
	}
	return k, nil
}

// choiceSeed varies a given seed per choice, so that n choices differ.
func choiceSeed(o llm.GenerateOptions, i int) llm.GenerateOptions {
	if o.Sample.Seed != llm.RandomSeed {
		o.Sample.Seed += uint64(i) // a request's seed is below 2^63: no wrap to RandomSeed
	}
	return o
}

// tokenPrompt reads a prompt: a string, an array of token ids, or (many) an array of strings
// or of token-id arrays. It returns the token ids and the text of each prompt.
func (s *Server) parsePrompt(raw json.RawMessage, many bool) ([][]int32, []string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, badRequest("prompt", "prompt is required")
	}
	tok := s.model.Tokenizer()
	var texts []string
	var ids [][]int32
	var one string
	var oneIDs []int32
	var manyTexts []string
	var manyIDs [][]int32
	switch {
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(raw, &oneIDs) == nil && len(oneIDs) > 0:
		ids = [][]int32{oneIDs}
	case many && json.Unmarshal(raw, &manyTexts) == nil && len(manyTexts) > 0:
		texts = manyTexts
	case many && json.Unmarshal(raw, &manyIDs) == nil && len(manyIDs) > 0:
		ids = manyIDs
	default:
		return nil, nil, badRequest("prompt", "prompt must be a string, an array of token ids, or a non-empty array of those")
	}
	if n := max(len(texts), len(ids)); n > s.cfg.MaxChoices {
		// Each prompt is at least one choice: refused before tokenizing them all.
		return nil, nil, badRequest("prompt", "%d prompts (at most %d choices in all)", n, s.cfg.MaxChoices)
	}
	V := int32(tok.VocabSize())
	if texts != nil {
		for _, t := range texts {
			ids = append(ids, s.model.Tokenize(t, true))
		}
	} else {
		for _, p := range ids {
			if len(p) == 0 {
				return nil, nil, badRequest("prompt", "a prompt of token ids is empty")
			}
			for _, id := range p {
				if id < 0 || id >= V {
					return nil, nil, badRequest("prompt", "token id %d is outside the vocabulary of %d", id, V)
				}
			}
			texts = append(texts, tok.Decode(p))
		}
	}
	for i, p := range ids {
		if len(p) == 0 { // as the library does: unconditional text starts at the start token
			ids[i] = []int32{s.model.StartToken()}
		}
		if len(ids[i]) >= s.model.ContextLength() {
			return nil, nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "prompt", Code: "context_length_exceeded",
				Message: promptTooLong(len(ids[i]), s.model.ContextLength())}
		}
	}
	return ids, texts, nil
}

func promptTooLong(n, ctx int) string {
	return "the prompt has " + itoa(n) + " tokens and the context holds " + itoa(ctx) + " (leave room for at least one generated token)"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// isNull reports whether a raw field is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// jsonObjectGrammar is response_format json_object's grammar, compiled once.
var jsonObjectGrammar = sync.OnceValues(func() (*grammar.Grammar, error) {
	return grammar.Parse(grammar.JSONGrammar())
})

// grammar compiles the request's constraint: response_format {"type": "json_object"} (any
// JSON object, or llama-server's {"type": "json_object", "schema": {...}}),
// {"type": "json_schema", "json_schema": {"schema": {...}}}, grammar (GBNF text) or
// json_schema (a schema). None: nil. A bad one is a 400 naming the field and the problem.
func (p *sampling) grammar() (*grammar.Grammar, *apiError) {
	given := 0
	for _, set := range []bool{!isNull(p.ResponseFormat), p.Grammar != nil, !isNull(p.JSONSchema)} {
		if set {
			given++
		}
	}
	if given > 1 {
		return nil, badRequest("grammar", "response_format, grammar and json_schema exclude each other: give one")
	}
	switch {
	case p.Grammar != nil:
		g, err := grammar.Parse(*p.Grammar)
		if err != nil {
			return nil, badRequest("grammar", "grammar: %v", err)
		}
		return g, nil
	case !isNull(p.JSONSchema):
		return compileSchema("json_schema", p.JSONSchema)
	case !isNull(p.ResponseFormat):
		return responseFormat(p.ResponseFormat)
	}
	return nil, nil
}

func compileSchema(param string, schema json.RawMessage) (*grammar.Grammar, *apiError) {
	g, err := grammar.CompileJSONSchema(schema)
	if err != nil {
		return nil, badRequest(param, "%s: %v", param, err)
	}
	return g, nil
}

// responseFormat reads OpenAI's response_format.
func responseFormat(raw json.RawMessage) (*grammar.Grammar, *apiError) {
	var f struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"` // llama-server's json_object with a schema
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, badRequest("response_format", "response_format must be an object such as {\"type\": \"json_object\"}")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		if !isNull(f.Schema) {
			return compileSchema("response_format.schema", f.Schema)
		}
		g, err := jsonObjectGrammar()
		if err != nil {
			return nil, &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
		}
		return g, nil
	case "json_schema":
		if f.JSONSchema == nil || isNull(f.JSONSchema.Schema) {
			return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema")
		}
		return compileSchema("response_format.json_schema.schema", f.JSONSchema.Schema)
	}
	return nil, badRequest("response_format", "response_format type %s is not one of text, json_object, json_schema", quote(f.Type))
}
