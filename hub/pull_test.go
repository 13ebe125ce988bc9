package hub

import (
	"slices"
	"testing"
)

// A Llama repository's tokenizer files are fetched: tokenizer.model too (conversion refuses
// SentencePiece, as it must see what llama.cpp's converter would read first) and
// special_tokens_map.json; sharded weights with their index; nothing else.
func TestCheckpointFilesLlama(t *testing.T) {
	files := []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "tokenizer.model", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
		"model-00002-of-00002.safetensors", "original/consolidated.00.pth", "README.md", "LICENSE"}
	got, err := CheckpointFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
		"special_tokens_map.json", "tokenizer.model", "model.safetensors.index.json",
		"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
