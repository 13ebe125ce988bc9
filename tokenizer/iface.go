package tokenizer

// Tokenizer turns text into token ids and back. Implementations are immutable after
// construction and safe for concurrent use (a Decoder is not).
type Tokenizer interface {
	// VocabSize is the number of tokens.
	VocabSize() int
	// Encode tokenizes text, matching the special tokens written in it (control and
	// user-defined tokens such as "<|endoftext|>" or "<|im_start|>") as llama.cpp and Hugging
	// Face do. It adds no BOS or EOS: Special says whether the model wants them.
	Encode(text string) []int32
	// AppendEncode is Encode appending to dst.
	AppendEncode(dst []int32, text string) []int32
	// EncodeOrdinary tokenizes text with the text of control tokens as ordinary characters.
	// User-defined tokens are still matched: llama.cpp and Hugging Face match them in any
	// text (llama.cpp's parse_special=false).
	EncodeOrdinary(text string) []int32
	// Decode returns the concatenated text of the tokens (out-of-range ids are skipped); it
	// may be invalid UTF-8 where the ids split a character.
	Decode(ids []int32) string
	// Piece is the raw text of one token ("" for an out-of-range id).
	Piece(id int32) string
	// TokenBytes is Piece as a fresh byte slice (nil for an out-of-range id).
	TokenBytes(id int32) []byte
	// Token is the token's string as the vocabulary stores it; ID is its inverse.
	Token(id int32) string
	ID(token string) (int32, bool)
	// EOS is the end-of-sequence id, or -1.
	EOS() int32
	// Special gives the special ids and whether BOS/EOS are added, from the file's metadata.
	Special() Special
	// IsEOG reports whether a generated id ends generation (EOS, end-of-turn, ...).
	IsEOG(id int32) bool
	// NewDecoder returns a streaming decoder (see Decoder).
	NewDecoder() *Decoder
}

// Special holds the special token ids of a vocabulary (-1 where absent) and the file's rules
// for adding BOS and EOS, as llama.cpp reads them from tokenizer.ggml.*.
type Special struct {
	BOS, EOS, EOT, EOM, UNK, PAD int32
	AddBOS, AddEOS               bool
	// EOG are the ids that end generation: EOS, EOT, EOM, and the tokens llama.cpp
	// recognizes by their text ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", ...).
	EOG []int32
}

func noSpecial() Special {
	return Special{BOS: -1, EOS: -1, EOT: -1, EOM: -1, UNK: -1, PAD: -1}
}

func (s *Special) isEOG(id int32) bool {
	for _, e := range s.EOG {
		if e == id {
			return true
		}
	}
	return false
}
