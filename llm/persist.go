package llm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// Saved sessions: a header, the tokens, the cache rows of the evaluated tokens, and a CRC-32
// of everything before it. All integers are little-endian.
//
//	magic "GORUNSES" | version u32 | model fingerprint u64 | layers u32 | embd u32 | cache type u32
//	| tokens u32 | evaluated u32 | tokens i32 x tokens
//	| per layer: keys, then values, of the evaluated tokens (embd f32 each) | crc32 u32
const (
	sessionMagic   = "GORUNSES"
	sessionVersion = 1
)

// Save writes the session (its tokens and their cached keys and values) so that
// Model.LoadSession can restore it later, in this process or another, with the same model
// file. The size is about 8 * layers * n_head_kv * head_dim bytes per token in the context.
//
// Save may be called from any goroutine, and from Generate's callback. While another call runs
// on the session, Save waits for its next step boundary (a callback of a Generate, or the
// call's end) and writes the state there; that call then waits until Save returns, so a slow w
// holds it up.
func (s *Session) Save(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.m.enter(); err != nil {
		return err
	}
	defer s.m.exit()
	hp := s.m.arch.Hparams()
	bw := bufio.NewWriter(w)
	crc := crc32.NewIEEE()
	out := io.MultiWriter(bw, crc)
	put := func(v any) { binary.Write(out, binary.LittleEndian, v) }
	io.WriteString(out, sessionMagic)
	put(uint32(sessionVersion))
	put(s.m.Fingerprint())
	put(uint32(hp.NLayer))
	put(uint32(hp.KVShape().Width)) // values per cache row (n_embd for GPT-2)
	put(uint32(s.m.cacheType))      // ggml's type id: 0 F32, 1 F16
	put(uint32(len(s.tokens)))
	put(uint32(s.npast))
	put(s.tokens)
	for l := 0; l < hp.NLayer; l++ {
		for _, v := range []bool{false, true} {
			err := s.kvRows(l, v, s.npast, func(rows []byte) error {
				_, err := out.Write(rows)
				return err
			})
			if err != nil {
				return fmt.Errorf("saving a session: %w", err)
			}
		}
	}
	binary.Write(bw, binary.LittleEndian, crc.Sum32())
	return bw.Flush()
}

// LoadSession reads a session that Save wrote into a new session of this model; r must end
// where the session does. It rejects (with ErrBadFile) a truncated or corrupted one, one with
// bytes after its checksum, and one whose cache holds a NaN or an infinity (a valid checksum
// does not make the values sane: a hostile or buggy writer computes it too), and (with
// ErrSessionMismatch) one saved from another model or holding more tokens than this model's
// context. Generating from the restored session continues exactly as the saved one would have.
func (m *Model) LoadSession(r io.Reader) (_ *Session, err error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.exit()
	hp := m.arch.Hparams()
	crc := crc32.NewIEEE()
	br := bufio.NewReader(r)
	in := io.TeeReader(br, crc)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: saved session: %s", ErrBadFile, fmt.Sprintf(format, args...))
	}
	var hdr struct {
		Magic       [8]byte
		Version     uint32
		Fingerprint uint64
		Layers      uint32
		Embd        uint32
		CacheType   uint32
		Tokens      uint32
		Evaluated   uint32
	}
	if err := binary.Read(in, binary.LittleEndian, &hdr); err != nil {
		return nil, bad("header: %v", err)
	}
	switch {
	case string(hdr.Magic[:]) != sessionMagic:
		return nil, bad("not a saved gorun session")
	case hdr.Version != sessionVersion:
		return nil, bad("version %d (this gorun reads version %d)", hdr.Version, sessionVersion)
	case hdr.Layers != uint32(hp.NLayer) || hdr.Embd != uint32(hp.KVShape().Width):
		return nil, fmt.Errorf("%w: it has %d layers of %d, the model %d of %d", ErrSessionMismatch, hdr.Layers, hdr.Embd, hp.NLayer, hp.KVShape().Width)
	case hdr.CacheType != uint32(m.cacheType):
		return nil, fmt.Errorf("%w: its KV cache holds %v values, the model's sessions %v (Options.CacheType)", ErrSessionMismatch, quant.Type(hdr.CacheType), m.cacheType)
	case hdr.Fingerprint != m.Fingerprint():
		if err := m.closedErr(); err != nil {
			return nil, err // closing: the fingerprint could not be computed
		}
		return nil, fmt.Errorf("%w: it was saved with other weights", ErrSessionMismatch)
	case hdr.Evaluated > hdr.Tokens:
		return nil, bad("%d evaluated of %d tokens", hdr.Evaluated, hdr.Tokens)
	case hdr.Tokens > uint32(m.nctx):
		return nil, fmt.Errorf("%w: it holds %d tokens, the context %d", ErrSessionMismatch, hdr.Tokens, m.nctx)
	}
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close() // its blocks go back to the pool
		}
	}()
	s.tokens = s.tokens[:hdr.Tokens]
	if err := binary.Read(in, binary.LittleEndian, s.tokens); err != nil {
		return nil, bad("tokens: %v", err)
	}
	for _, t := range s.tokens {
		if t < 0 || int(t) >= hp.NVocab {
			return nil, bad("token %d outside the vocabulary", t)
		}
	}
	n := int(hdr.Evaluated)
	if err := s.reserve(n); err != nil {
		return nil, fmt.Errorf("restoring a session of %d evaluated tokens: %w", n, err)
	}
	for l := 0; l < hp.NLayer; l++ {
		for _, v := range []bool{false, true} {
			var short error
			err := s.kvRows(l, v, n, func(rows []byte) error {
				if _, err := io.ReadFull(in, rows); err != nil {
					short = err
					return err
				}
				return nil
			})
			switch {
			case short != nil:
				return nil, bad("cache: %v", short)
			case err != nil:
				return nil, fmt.Errorf("restoring a session: %w", err)
			}
		}
	}
	sum := crc.Sum32()
	var got uint32
	if err := binary.Read(in, binary.LittleEndian, &got); err != nil {
		return nil, bad("checksum: %v", err)
	}
	if got != sum {
		return nil, bad("checksum mismatch: the data is corrupted")
	}
	if _, err := br.ReadByte(); err == nil {
		return nil, bad("data after the checksum (a saved session is the whole stream)")
	} else if err != io.EOF {
		return nil, fmt.Errorf("saved session: reading after the checksum: %w", err)
	}
	if err := checkFiniteCache(s, n); err != nil {
		return nil, bad("%v", err)
	}
	s.npast = n
	s.commit()
	s.logitsOK = false // the next call recomputes the last token's logits
	return s, nil
}

// checkFiniteCache reports the first NaN or infinity in the session's keys and values of the
// first n tokens (f32 or f16 values): attention over one turns every later logit into NaN.
func checkFiniteCache(s *Session, n int) error {
	es := 4
	if s.m.cacheType == quant.F16 {
		es = 2
	}
	rowBytes := es * s.m.arch.Hparams().KVShape().Width
	for l := 0; l < s.m.arch.Hparams().NLayer; l++ {
		for _, v := range []bool{false, true} {
			token := 0 // the token of the first row of rows
			err := s.kvRows(l, v, n, func(rows []byte) error {
				defer func() { token += len(rows) / rowBytes }()
				for i := 0; i+es <= len(rows); i += es {
					var x float64
					if es == 2 {
						x = float64(quant.F16ToF32(binary.LittleEndian.Uint16(rows[i:])))
					} else {
						x = float64(math.Float32frombits(binary.LittleEndian.Uint32(rows[i:])))
					}
					if math.IsNaN(x) || math.IsInf(x, 0) {
						what := "keys"
						if v {
							what = "values"
						}
						return fmt.Errorf("cache: layer %d %s of token %d: %v is not finite", l, what, token+i/rowBytes, x)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Fingerprint identifies the model's weights: a hash of the architecture, the tensor table and
// a sample of every tensor's bytes. Saved sessions carry it. It is computed on first use, which
// reads the mapped weights: after Close it is 0 unless it was computed before.
func (m *Model) Fingerprint() uint64 {
	m.fpOnce.Do(func() {
		if m.enter() != nil {
			return // closed: the mapping is gone
		}
		defer m.exit()
		h := fnv.New64a()
		hp := m.arch.Hparams()
		fmt.Fprintf(h, "%+v|", hp)
		for i := range m.file.Tensors {
			ti := &m.file.Tensors[i]
			fmt.Fprintf(h, "%s %v %v %d|", ti.Name, ti.Type, ti.Dims, ti.Size)
			sample(h, m.file.Data(ti))
		}
		m.fingerprint = h.Sum64()
	})
	return m.fingerprint
}

// sample hashes up to 16 spread-out 256-byte windows of b.
func sample(h hash.Hash64, b []byte) {
	const win, n = 256, 16
	if len(b) <= win*n {
		h.Write(b)
		return
	}
	step := (len(b) - win) / (n - 1)
	for i := 0; i < n; i++ {
		h.Write(b[i*step : i*step+win])
	}
}
