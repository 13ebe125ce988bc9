package llm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// batchInvariantRecipes are the weight types whose matrix products the CPU backend computes
// in the same order whatever the number of activation rows.
var batchInvariantRecipes = []string{"f16", "q8_0", "q4_0", "q5_1", "q4_k_m", "q6_k"}

// Batched decoding gives every session bit-identical logits to the same step computed alone,
// for float and quantized weights: each row of a batched step goes through the same kernels in
// the same summation order as a lone row.
func TestBatchedStepBitIdentical(t *testing.T) {
	checkBatchedStep(t, "tiny", true)
}

// checkBatchedStep checks a preset (at f32 and quantized with batchInvariantRecipes, and the
// GPT-2 fixtures when withFixtures) for TestBatchedStepBitIdentical.
func checkBatchedStep(t *testing.T, preset string, withFixtures bool) {
	c, _ := testmodel.Preset(preset)
	dir := t.TempDir()
	base := filepath.Join(dir, "tiny-f32.gguf")
	c.Type = quant.F32
	if err := testmodel.Write(base, c); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"f32": base}
	for _, recipe := range batchInvariantRecipes {
		ft, err := quantize.ParseFileType(recipe)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "tiny-"+recipe+".gguf")
		if _, err := quantize.File(base, p, quantize.Options{FileType: ft, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		files[recipe] = p
	}
	// The fixtures have rows of 256: real K-quant blocks (the tiny random model's 64-wide rows
	// fall back to Q5_0/Q8_0 in the K recipes).
	if dir, err := fixtures.Find(); err == nil && withFixtures {
		for _, f := range []string{"gpt2-tiny-q4_K_M.gguf", "gpt2-tiny-q4_0.gguf", "gpt2-tiny-q8_0.gguf"} {
			files[f] = filepath.Join(dir, f)
		}
	}
	prompts := [][]int32{{5, 300, 17}, {42}, {7, 3, 250, 251, 400, 12, 13}, {99, 100}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	type run struct {
		threads int
		qact    QuantAct
	}
	for name, path := range files {
		runs := []run{{1, QuantActAuto}, {3, QuantActOff}, {2, QuantActOn}}
		if strings.HasPrefix(name, "gpt2-") {
			runs = runs[1:] // a 50257-token vocabulary: fewer runs
		}
		for _, r := range runs {
			threads := r.threads
			m, err := Load(path, Options{Threads: threads, QuantizedActivations: r.qact})
			if err != nil {
				t.Fatal(err)
			}
			// Alone: each session evaluates its prompt, then one token through its decode graph.
			V := m.Hparams().NVocab
			want := make([][]float32, len(prompts))
			for i, p := range prompts {
				s, _ := m.NewSession()
				if _, err := s.Eval(p); err != nil {
					t.Fatal(err)
				}
				l, err := s.Eval([]int32{int32(30 * i)})
				if err != nil {
					t.Fatal(err)
				}
				want[i] = append([]float32(nil), l...)
			}
			// Together: the same last tokens as the rows of one batched step.
			var batch []*Session
			for i, p := range prompts {
				s, _ := m.NewSession()
				if _, err := s.Eval(p); err != nil {
					t.Fatal(err)
				}
				s.tokens = append(s.tokens, int32(30*i))
				batch = append(batch, s)
			}
			// The last two reuse the graphs of sizes 2 and 3 with other sessions' caches.
			subs := [][]*Session{batch, batch[1:4], batch[:2], {batch[3], batch[4]}, {batch[0], batch[2], batch[4]}}
			for _, sub := range subs {
				for _, s := range sub {
					s.npast = len(s.tokens) - 1
				}
				if err := m.batch.run(m, append([]*Session(nil), sub...)); err != nil {
					t.Fatal(err)
				}
				for _, s := range sub {
					i := indexOf(batch, s)
					for j := 0; j < V; j++ {
						if s.logits[j] != want[i][j] {
							t.Fatalf("%s, %+v, batch of %d: session %d logit %d: batched %v, alone %v", name, r, len(sub), i, j, s.logits[j], want[i][j])
						}
					}
				}
			}
			if m.batch.builds != 3 {
				t.Errorf("%s: %d batch graphs built for batches of 5, 3, 2, 2 and 3 sessions (want one per size)", name, m.batch.builds)
			}
			m.Close()
		}
	}
}

func indexOf(b []*Session, s *Session) int {
	for i, x := range b {
		if x == s {
			return i
		}
	}
	return -1
}

// Eight sessions generate at the same time (run under -race): each gives the same greedy text
// as a session running alone; some are cancelled mid-stream, stay usable, and continue to the
// same text. Their steps are computed in shared batches.
func TestConcurrentSessions(t *testing.T) {
	var m *Model
	if dir, err := fixtures.Find(); err == nil {
		m, err = Load(filepath.Join(dir, "gpt2-tiny-f16.gguf"), Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
	} else {
		t.Logf("fixtures: %v; using a random model", err)
		m = tinyModel(t, func(c *testmodel.Config) { c.NCtx = 128 }, Options{Threads: 2})
	}
	prompts := []string{"In the beginning God created", "The quick brown fox", "Hello, world! This is a test of",
		"A dictionary is", "hacker: n. 1. A person who", "And the LORD said", "Jargon", "To be"}
	const n = 24
	opts := GenerateOptions{MaxTokens: n, IgnoreEOS: true}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		s, _ := m.NewSession()
		want[i], _ = genText(t, s, p, opts)
	}
	m.batch.mu.Lock()
	m.batch.steps, m.batch.rows, m.batch.maxRows = 0, 0, 0
	m.batch.mu.Unlock()
	got := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	var wg, ready sync.WaitGroup
	ready.Add(len(prompts))
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.NewSession()
			ready.Done()
			if err != nil {
				errs[i] = err
				return
			}
			ready.Wait() // start together
			var sb strings.Builder
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pieces := 0
			st, err := s.Generate(ctx, p, opts, func(piece string) error {
				sb.WriteString(piece)
				if pieces++; i%3 == 0 && pieces == 3+i {
					cancel() // mid-stream
				}
				return nil
			})
			if i%3 == 0 {
				if !errors.Is(err, ErrCancelled) || st.Stop != StopCancelled || st.Tokens >= n || st.GenTime <= 0 || st.PromptTime <= 0 {
					errs[i] = fmt.Errorf("cancelled session: %+v, %v", st, err)
					return
				}
				// Still usable: generate the rest.
				st2, err := s.Generate(context.Background(), "", GenerateOptions{MaxTokens: n - st.Tokens, IgnoreEOS: true},
					func(piece string) error { sb.WriteString(piece); return nil })
				if err != nil || st2.Tokens != n-st.Tokens {
					errs[i] = fmt.Errorf("after cancelling: %+v, %v", st2, err)
					return
				}
			} else if err != nil || st.Tokens != n {
				errs[i] = fmt.Errorf("%+v, %v", st, err)
				return
			}
			got[i] = sb.String()
		}()
	}
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil {
			t.Errorf("session %d: %v", i, errs[i])
		} else if got[i] != want[i] {
			t.Errorf("session %d (%q):\n got %q\nwant %q", i, prompts[i], got[i], want[i])
		}
	}
	b := &m.batch
	b.mu.Lock()
	t.Logf("%d steps computed %d rows, at most %d at once", b.steps, b.rows, b.maxRows)
	if b.maxRows < 2 {
		t.Errorf("no step was shared: largest batch %d", b.maxRows)
	}
	b.mu.Unlock()
}

// noRowsBackend is a CPU backend that cannot run the batch graph's ops, as a GPU backend
// without them; it has no paged ops either (as the CUDA backend), so its sessions keep
// whole-context caches.
type noRowsBackend struct{ graph.Backend }

func (b noRowsBackend) Supports(n *graph.Tensor) error {
	if n.Op == graph.OpStoreKVPaged || n.Op == graph.OpAttentionPaged {
		return fmt.Errorf("op %v is not supported", n.Op)
	}
	return b.Backend.Supports(n)
}

func (b noRowsBackend) Compute(g *graph.Graph) error {
	for _, n := range g.Nodes {
		if n.Op == graph.OpAttentionRows || n.Op == graph.OpStoreKVRows {
			return fmt.Errorf("op %v is not supported", n.Op)
		}
	}
	return b.Backend.Compute(g)
}

// On a backend without the rows ops, concurrent sessions take turns and still give the text
// they give alone.
func TestConcurrentSessionsWithoutRowsOps(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	m := tinyModel(t, nil, Options{Backend: noRowsBackend{be}})
	prompts := []string{"a b", "c d e", "f"}
	opts := GenerateOptions{MaxTokens: 40, IgnoreEOS: true}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		s, _ := m.NewSession()
		want[i], _ = genText(t, s, p, opts)
	}
	got := make([]string, len(prompts))
	var wg, ready, first sync.WaitGroup
	ready.Add(len(prompts))
	first.Add(len(prompts))
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := m.NewSession()
			_, err := s.Eval(m.Tokenizer().Encode(p))
			ready.Done()
			if err != nil {
				t.Error(err)
				first.Done()
				return
			}
			ready.Wait() // generate together
			var sb strings.Builder
			seen := false
			piece := func(x string) error {
				sb.WriteString(x)
				if !seen { // every session is mid-generation before any goes on: steps overlap
					seen = true
					first.Done()
					first.Wait()
				}
				return nil
			}
			_, err = s.Generate(context.Background(), "", opts, piece)
			if !seen {
				first.Done() // never produced a piece: do not hold the others
			}
			if err != nil {
				t.Error(err)
			}
			got[i] = sb.String()
		}()
	}
	wg.Wait()
	for i := range prompts {
		if got[i] != want[i] {
			t.Errorf("session %d: %q, alone %q", i, got[i], want[i])
		}
	}
	if !m.batch.noRows {
		t.Error("no batch was tried (or the failure went unnoticed)")
	}
}

// While another session generates, a long prompt is evaluated in slices (so the other's steps
// run between them), with the same logits as in one piece.
func TestPromptSlicedWhileOthersGenerate(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 256 }, Options{Threads: 2})
	prompt := make([]int32, 150)
	for i := range prompt {
		prompt[i] = int32(i * 37 % 512)
	}
	lone, _ := m.NewSession()
	want, err := lone.Eval(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if lone.batch.n != 150 {
		t.Fatalf("alone, the prompt ran in batches of %d", lone.batch.n)
	}
	a, _ := m.NewSession()
	inLoop, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		first := true
		_, err := a.GenerateTokens(context.Background(), "x y", GenerateOptions{MaxTokens: 4, IgnoreEOS: true}, func(Piece) error {
			if first {
				first = false
				close(inLoop)
				<-release // generating, held up by its reader
			}
			return nil
		})
		done <- err
	}()
	<-inLoop
	b, _ := m.NewSession()
	b.SetPrefixCache(false) // compute the prompt (in slices), not take lone's blocks
	got, err := b.Eval(prompt)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.batch.n != 150%promptSlice {
		t.Errorf("last slice of %d tokens, want %d", b.batch.n, 150%promptSlice)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: sliced %v, whole %v", i, got[i], want[i])
		}
	}
}

// On a real GPU (a cuda build on a machine with one): batched steps, with the rows' caches
// rebound between batches of the same size, give each session's logits bit for bit as its
// own decode graph does.
func TestBatchedStepGPU(t *testing.T) {
	if d, err := backend.GPU(); err != nil || d.Name == "fakegpu" {
		t.Skip("no GPU backend in this build")
	}
	c, _ := testmodel.Preset("llama-tiny")
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, Options{GPULayers: 99})
	if err != nil {
		t.Skipf("GPU: %v", err)
	}
	defer m.Close()
	V := m.Hparams().NVocab
	var batch []*Session
	var want [][]float32
	for i := range 12 {
		p := []int32{int32(3 + i), int32(40 + 2*i), 7}[:1+i%3]
		s, _ := m.NewSession()
		if _, err := s.Eval(p); err != nil {
			t.Fatal(err)
		}
		l, err := s.Eval([]int32{int32(5 * i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, append([]float32(nil), l...))
		if err := s.Rewind(len(p)); err != nil {
			t.Fatal(err)
		}
		s.tokens = append(s.tokens, int32(5*i))
		batch = append(batch, s)
	}
	subs := [][]*Session{batch, batch[:3], {batch[4], batch[7], batch[9]}, batch[2:12], {batch[0], batch[1], batch[5], batch[6], batch[8], batch[10], batch[11], batch[3], batch[2], batch[4]}}
	for _, sub := range subs {
		for _, s := range sub {
			s.npast = len(s.tokens) - 1
		}
		if err := m.batch.run(m, append([]*Session(nil), sub...)); err != nil {
			t.Fatal(err)
		}
		for _, s := range sub {
			i := indexOf(batch, s)
			for j := 0; j < V; j++ {
				if s.logits[j] != want[i][j] {
					t.Fatalf("batch of %d: session %d logit %d: batched %v, alone %v", len(sub), i, j, s.logits[j], want[i][j])
				}
			}
		}
	}
	if m.batch.noRows || m.batch.builds != 3 {
		t.Errorf("noRows %v, %d graphs built for batches of 12, 3, 3, 10, 10 (want 3)", m.batch.noRows, m.batch.builds)
	}
}

// A batch graph is reused for later batches of the same size after one of its sessions was
// closed (its cache released): the rows are rebound from the caches the graph holds, not from
// the closed session (which once panicked with whole-context caches, as on the GPU), and the new
// member's logits are its solo ones.
func TestBatchReusedAfterMemberClosed(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	m := presetModel(t, "llama-tiny", nil, Options{Backend: noPagedBackend{be}})
	defer m.Close()
	open := func(i int) (*Session, []float32) {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		p := []int32{int32(3 + i), int32(40 + 2*i)}
		if _, err := s.Eval(p); err != nil {
			t.Fatal(err)
		}
		l, err := s.Eval([]int32{int32(5 * i)})
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), l...)
		if err := s.Rewind(len(p)); err != nil {
			t.Fatal(err)
		}
		s.tokens = append(s.tokens, int32(5*i))
		s.npast = len(s.tokens) - 1
		return s, want
	}
	step := func(batch []*Session, want [][]float32) {
		t.Helper()
		if err := m.batch.run(m, append([]*Session(nil), batch...)); err != nil {
			t.Fatal(err)
		}
		for i, s := range batch {
			if k := sameBits(s.logits, want[i]); k >= 0 {
				t.Fatalf("session %d logit %d: batched %v, alone %v", i, k, s.logits[k], want[i][k])
			}
		}
	}
	s0, w0 := open(0)
	s1, w1 := open(1)
	s2, w2 := open(2)
	step([]*Session{s0, s1, s2}, [][]float32{w0, w1, w2})
	s1.Close()
	s3, w3 := open(3)
	for _, s := range []*Session{s0, s2} { // step the same token again
		last := s.tokens[len(s.tokens)-1]
		if err := s.Rewind(len(s.tokens) - 1); err != nil {
			t.Fatal(err)
		}
		s.tokens = append(s.tokens, last)
		s.npast = len(s.tokens) - 1
	}
	step([]*Session{s0, s3, s2}, [][]float32{w0, w3, w2})
	if m.batch.builds != 1 {
		t.Errorf("%d batch graphs built, want 1 (the second batch reuses the first's)", m.batch.builds)
	}
}
