package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// The committed cuda/types.h is what the generator writes now: a type renumbered or added in
// quant without `go generate ./cuda/` fails here, without a GPU or the CUDA toolkit.
func TestTypesHeaderUpToDate(t *testing.T) {
	committed, err := os.ReadFile("../types.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, header()) {
		t.Fatalf("cuda/types.h is stale: run go generate ./cuda/ (it writes:\n%s)", header())
	}
}

// The ids the kernels are instantiated with keep the numbers the embedded PTX was compiled
// with (kernels.ptx.gz is rebuilt only where nvcc is).
func TestKernelTypeIDs(t *testing.T) {
	want := map[string]quant.Type{
		"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
		"Q4_K": 12, "Q5_K": 13, "Q6_K": 14,
	}
	got := map[string]quant.Type{}
	for _, m := range regexp.MustCompile(`(?m)^#define T_(\w+) (\d+)$`).FindAllSubmatch(header(), -1) {
		n, err := strconv.Atoi(string(m[2]))
		if err != nil {
			t.Fatal(err)
		}
		got[string(m[1])] = quant.Type(n)
	}
	for name, id := range want {
		if got[name] != id {
			t.Errorf("T_%s is %d, the PTX has %d", name, got[name], id)
		}
	}
}
