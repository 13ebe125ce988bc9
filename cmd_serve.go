package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/server"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func cmdServe(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once, without waiting for the grace period
	}()
	return serve(ctx, args, stderr, nil)
}

// serve runs the server until ctx ends, then shuts it down gracefully: it stops accepting,
// lets running requests finish for the grace period, then cancels them (streams end with an
// error event) and closes the model. ready, when set, gets the address it listens on.
func serve(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	fs := newFlags("serve", "gorun serve -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [--parallel N] [-c CTX] [--api-key KEY] [--allowed-hosts NAMES]: an HTTP server speaking OpenAI's, llama-server's and ollama's APIs", stderr)
	var mf modelFlags
	mf.register(fs)
	host := fs.String("host", "127.0.0.1", "`ADDRESS` to listen on (0.0.0.0: every interface)")
	port := fs.Int("port", 8080, "TCP port (0: any free one)")
	parallel := fs.Int("parallel", 4, "requests generating at the same time (slots; each holds a context of -c tokens)")
	fs.IntVar(parallel, "np", 4, "same as --parallel")
	queue := fs.Int("queue", 64, "requests waiting for a slot before the server answers 503")
	apiKey := fs.String("api-key", "", "require this `KEY` (Authorization: Bearer KEY); default: $GORUN_API_KEY")
	alias := fs.String("alias", "", "model `NAME` the API reports and accepts (default: the file's name)")
	// llama-server's default: a request without max_tokens (n_predict) generates until the
	// end of text, a stop string or a full context, as `gorun -n -1` does.
	n := fs.Int("n", -1, "tokens to generate when a request gives no max_tokens or n_predict (-1: until end of text, a stop string or a full context)")
	fs.IntVar(n, "n-predict", -1, "same as -n")
	fs.IntVar(n, "predict", -1, "same as -n")
	mf.chat.register(fs)
	var chatStop stringList
	fs.Var(&chatStop, "chat-stop", "stop `TEXT` of every chat answer (repeatable; default \"\\nUser:\" with the plain format of a model without a chat template)")
	var allowed stringList
	fs.Var(&allowed, "allowed-hosts", "host `names` requests may be sent to (the Host header) and whose web pages may call the server (Origin), besides IP addresses, localhost and --host; comma-separated, repeatable; * for any")
	maxBody := fs.Int64("max-body", 4<<20, "largest request body in bytes")
	pooling := fs.String("pooling", "", "how /v1/embeddings and /api/embed pool a text: `mean|last|cls` (default: the model's pooling_type, else mean)")
	embeddings := fs.Bool("embeddings", false, "accepted for llama-server's sake: embeddings are always served")
	fs.BoolVar(embeddings, "embedding", false, "same as --embeddings")
	grace := fs.Duration("shutdown-grace", 10*time.Second, "how long running requests may finish after SIGINT/SIGTERM")
	// Requests are logged to stderr, one line each (llama-server's habit); -v adds the
	// prompts' text, --log-disable turns the log off.
	var logs logFlags
	logs.register(fs)
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	switch {
	case *port < 0 || *port > 65535:
		return usageError(fs, stderr, "--port %d is outside 0..65535", *port)
	case *parallel < 1 || *parallel > 1024:
		return usageError(fs, stderr, "--parallel %d is outside 1..1024", *parallel)
	case *queue < 0:
		return usageError(fs, stderr, "--queue %d is negative", *queue)
	case *n < -1 || *n == 0:
		return usageError(fs, stderr, "-n %d (want -1 or a count of at least 1)", *n)
	case *maxBody < 1:
		return usageError(fs, stderr, "--max-body %d is not positive", *maxBody)
	}
	pool, err := llm.ParsePooling(*pooling)
	if err != nil || *pooling == "default" {
		return usageError(fs, stderr, "--pooling %q: want mean, last or cls", *pooling)
	}
	if *apiKey == "" {
		*apiKey = os.Getenv("GORUN_API_KEY")
	}
	name := *alias
	if name == "" {
		name = filepath.Base(mf.model)
	}
	info, closeLog, err := logs.open(stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	mf.kvContexts = *parallel // the default pool: a whole context per slot
	m, err := mf.load(info)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := checkSlotsMemory(m, *parallel, int64(mf.mem), mf.kv != kvBudget{}); err != nil {
		return err
	}
	cfg := server.Config{Model: m, ModelName: name, Parallel: *parallel, Queue: *queue, APIKey: *apiKey,
		DefaultMaxTokens: *n, MaxBodyBytes: *maxBody, AllowedHosts: allowedHosts(*host, allowed),
		AccessLog: info, LogPrompts: logs.verbose, Pooling: pool}
	if chatStop != nil {
		cfg.ChatStop = chatStop
	}
	if *queue == 0 {
		cfg.Queue = -1
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if srv.Plain() {
		fmt.Fprintf(info, "gorun serve: the model has no chat template (tokenizer.chat_template): chats are plain 'User:'/'Assistant:' lines (--chat-template sets one)\n")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	// Requests' contexts derive from base: cancelling it stops every generation.
	base, cancelAll := context.WithCancelCause(context.Background())
	defer cancelAll(nil)
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	addr := ln.Addr().String()
	fmt.Fprintf(stderr, "gorun serve: model %s (%s), %d slots of %d tokens, listening on http://%s\n", name, mf.model, *parallel, m.ContextLength(), addr)
	if kv := m.KVStats(); kv.Paged {
		fmt.Fprintf(stderr, "gorun serve: KV pool of %d blocks of %d positions (%d positions, %s)\n", kv.Blocks, kv.BlockSize, kv.Blocks*kv.BlockSize, llm.FormatBytes(kv.Bytes))
	}
	if *apiKey == "" && !isLoopback(*host) {
		fmt.Fprintf(stderr, "gorun serve: warning: listening on %s without --api-key\n", *host)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(addr)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "gorun serve: shutting down (running requests have %v; Ctrl-C again to quit now)\n", *grace)
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// The grace period is over: stop the generations (their streams end with an error
		// event) and close the connections.
		cancelAll(server.ErrShutdown)
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkSlotsMemory refuses --parallel slots whose sessions would not fit the memory (Load
// checked the model and one session): the limit of --mem-limit, else the memory available.
// With --kv-budget (budget) on a paged model the slots share the pool, counted once.
func checkSlotsMemory(m *llm.Model, slots int, limit int64, budget bool) error {
	what := "the limit set (--mem-limit)"
	if limit == 0 {
		avail, ok := osutil.MemAvailable()
		if !ok {
			return nil
		}
		limit, what = avail, "available on this machine"
	}
	if limit < 0 || slots <= 1 {
		return nil
	}
	e, err := m.EstimateMemory(0)
	if err != nil {
		return err
	}
	need := e.Weights + int64(slots)*e.Session()
	if kv := m.KVStats(); kv.Paged && budget {
		need = e.Weights + int64(slots)*(e.Session()-e.KVCache) + kv.Bytes
	}
	if need <= limit {
		return nil
	}
	return fmt.Errorf("%w: %d slots of %d tokens need %s (weights %s + %s per slot), but %s is %s; lower --parallel or -c",
		llm.ErrOutOfMemory, slots, m.ContextLength(), llm.FormatBytes(need), llm.FormatBytes(e.Weights), llm.FormatBytes(e.Session()), what, llm.FormatBytes(limit))
}

// allowedHosts is --allowed-hosts split at commas, with the --host name when it is one (the
// server accepts IP addresses and localhost itself).
func allowedHosts(host string, flags []string) []string {
	var hosts []string
	for _, f := range flags {
		for _, h := range strings.Split(f, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
	}
	if host != "" && net.ParseIP(host) == nil {
		hosts = append(hosts, host)
	}
	return hosts
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
