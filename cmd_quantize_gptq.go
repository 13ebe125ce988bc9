package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/progress"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// calibrateGPTQ runs the model over a calibration text as --calib does (chunks of the
// context length, every position's output) and returns, per weight matrix, the second moments
// of its inputs (for quantize's GPTQ) and their diagonal means (the importance matrix --calib
// gives, for the tensors that share a matrix's columns, such as a tied token embedding).
func calibrateGPTQ(model, textFile string, threads, ctxLen int, stderr io.Writer) (map[string][]float32, map[string]*quantize.Moments, error) {
	m, chunk, err := loadForIMatrix(modelFlags{model: model, threads: threads, ctx: ctxLen, batch: 1}, stderr)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	obs, ok := m.Backend().(graph.Observable)
	if !ok {
		return nil, nil, fmt.Errorf("the %s backend cannot report activations", m.Backend().Name())
	}
	text, err := readInput("--calib", textFile, maxTextBytes)
	if err != nil {
		return nil, nil, err
	}
	tokens := m.Tokenize(string(text), true)
	n := len(tokens) / chunk
	if n == 0 {
		return nil, nil, fmt.Errorf("%s: %d tokens are fewer than one chunk of %d; use a longer text or a smaller --calib-c", textFile, len(tokens), chunk)
	}
	s, err := m.NewSession()
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	acc := &momentSums{threads: m.Threads(), sums: map[string]*quantize.Moments{}}
	obs.SetObserver(acc.observe)
	defer obs.SetObserver(nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := progress.New(stderr, "gptq calibration", int64(n))
	logits := make([]float32, chunk*m.Hparams().NVocab)
	toks := make([]int32, chunk)
	for c := 0; c < n; c++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		copy(toks, tokens[c*chunk:(c+1)*chunk])
		if sp := m.Tokenizer().Special(); sp.AddBOS && sp.BOS >= 0 {
			toks[0] = sp.BOS // as llama-imatrix
		}
		if err := s.Reset(); err != nil {
			return nil, nil, err
		}
		if err := s.EvalLogits(toks, 0, logits); err != nil {
			return nil, nil, err
		}
		bar.Set(int64(c+1), "chunks", true)
	}
	bar.Done()
	if len(acc.sums) == 0 {
		return nil, nil, fmt.Errorf("no matrix multiplications observed")
	}
	imp := make(map[string][]float32, len(acc.sums))
	for name, mo := range acc.sums {
		d := make([]float32, mo.Cols)
		for j := range d {
			d[j] = float32(mo.Sum[j*mo.Cols+j] / float64(mo.N))
		}
		imp[name] = d
	}
	fmt.Fprintf(stderr, "quantize: gptq: %d tokens of %s, %d chunks, second moments of %d matrices\n", len(tokens), textFile, n, len(acc.sums))
	return imp, acc.sums, nil
}

// momentSums accumulates sum x x^T (the upper triangle) of the inputs of every matrix
// multiplication by a named weight of the file.
type momentSums struct {
	threads int
	sums    map[string]*quantize.Moments
	x       []float64
}

func (a *momentSums) observe(t *graph.Tensor) {
	if t.Op != graph.OpMulMat {
		return
	}
	w, x := t.Src[0], t.Src[1]
	if w.Flags&graph.FlagStatic == 0 || w.Name == "" || x.Type != quant.F32 {
		return
	}
	if !strings.HasPrefix(w.Name, "blk.") && w.Name != "output.weight" && w.Name != "token_embd.weight" {
		return
	}
	n, rows := x.Ne[0], x.NRows()
	mo := a.sums[w.Name]
	if mo == nil {
		mo = &quantize.Moments{Cols: n, Sum: make([]float64, n*n)}
		a.sums[w.Name] = mo
	}
	if mo.Cols != n {
		return // not a plain matrix product of the weight's columns
	}
	if cap(a.x) < rows*n {
		a.x = make([]float64, rows*n)
	}
	xs := a.x[:rows*n]
	for r := 0; r < rows; r++ {
		for j, v := range x.F32Row(r) {
			xs[r*n+j] = float64(v)
		}
	}
	mo.N += rows
	// Row i of the upper triangle gets sum_r x_ri x_r[i:]; the rows i are dealt out to the
	// threads in turn, which balances the triangle's shrinking rows.
	var wg sync.WaitGroup
	for th := 0; th < a.threads; th++ {
		wg.Add(1)
		go func(th int) {
			defer wg.Done()
			for i := th; i < n; i += a.threads {
				dst := mo.Sum[i*n+i : (i+1)*n]
				for r := 0; r < rows; r++ {
					xr := xs[r*n : (r+1)*n]
					xi := xr[i]
					if xi == 0 {
						continue
					}
					for k, v := range xr[i:] {
						dst[k] += xi * v
					}
				}
			}
		}(th)
	}
	wg.Wait()
}
