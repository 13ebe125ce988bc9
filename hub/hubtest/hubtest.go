// Package hubtest is a local stand-in for the Hugging Face Hub's download endpoints, for tests:
// /api/models/ORG/NAME/revision/REV (the file list), /ORG/NAME/resolve/REV/FILE (small files
// served directly with a git ETag, LFS files redirected to a storage URL with their sha256 as
// X-Linked-Etag) and the storage URL itself, which honours Range requests. It can cut a
// connection part way, corrupt a body, and refuse a gated repository without a token.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Repo is one repository's files at one commit.
type Repo struct {
	Commit string // 40 hex digits
	Files  map[string][]byte
	Gated  bool // needs the server's Token
}

// Server is the fake Hub.
type Server struct {
	*httptest.Server
	Token string

	mu         sync.Mutex
	repos      map[string]*Repo
	blobs      map[string][]byte // sha256 -> content
	cutAfter   int64             // the next storage response stops after this many bytes
	stallAfter int64             // the next storage response stalls after this many bytes
	corrupt    bool              // storage responses flip a byte
	ranges     []string          // Range headers of storage requests
	gets       int               // storage requests
}

// New starts a server with the given repositories (keyed "ORG/NAME").
func New(repos map[string]*Repo) *Server {
	s := &Server{repos: repos, blobs: map[string][]byte{}}
	for _, r := range repos {
		for _, b := range r.Files {
			sum := sha256.Sum256(b)
			s.blobs[hex.EncodeToString(sum[:])] = b
		}
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// CutNext makes the next storage download end after n bytes, the connection closed.
func (s *Server) CutNext(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutAfter = n
}

// StallNext makes the next storage download stop sending after n bytes, the connection kept
// open until the client gives up.
func (s *Server) StallNext(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallAfter = n
}

// Corrupt makes storage downloads send a wrong byte.
func (s *Server) Corrupt(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt = on
}

// Ranges returns the Range headers of the storage requests so far ("" for none).
func (s *Server) Ranges() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// Downloads counts storage requests.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// IsLFS says which files the fake stores in LFS: safetensors, GGUF and anything over 10 KiB.
func IsLFS(name string, b []byte) bool {
	return strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".gguf") || len(b) > 10<<10
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "cdn/"); ok {
		s.storage(w, r, rest)
		return
	}
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		parts := strings.SplitN(rest, "/", 4)
		if len(parts) != 4 || parts[2] != "revision" {
			http.NotFound(w, r)
			return
		}
		repo := s.repo(w, r, parts[0]+"/"+parts[1], parts[3])
		if repo == nil {
			return
		}
		var sib []map[string]string
		for name := range repo.Files {
			sib = append(sib, map[string]string{"rfilename": name})
		}
		sort.Slice(sib, func(i, j int) bool { return sib[i]["rfilename"] < sib[j]["rfilename"] })
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": parts[0] + "/" + parts[1], "sha": repo.Commit, "siblings": sib})
		return
	}
	parts := strings.SplitN(p, "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo := s.repo(w, r, parts[0]+"/"+parts[1], parts[3])
	if repo == nil {
		return
	}
	b, ok := repo.Files[parts[4]]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if IsLFS(parts[4], b) {
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		w.Header().Set("X-Linked-Etag", `"`+h+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		w.Header().Set("ETag", `"`+h+`"`)
		w.Header().Set("Location", "http://"+r.Host+"/cdn/"+h) // absolute, as the Hub's storage URLs are
		w.WriteHeader(http.StatusFound)
		return
	}
	sum := sha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(b))), b...))
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	http.ServeContent(w, r, parts[4], time.Time{}, bytes.NewReader(b))
}

// repo finds a repository and checks the token for a gated one; it answers the request itself
// when it returns nil.
func (s *Server) repo(w http.ResponseWriter, r *http.Request, name, rev string) *Repo {
	s.mu.Lock()
	repo := s.repos[name]
	s.mu.Unlock()
	if repo == nil || (rev != "main" && rev != repo.Commit) {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
		return nil
	}
	if repo.Gated && r.Header.Get("Authorization") != "Bearer "+s.Token {
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model "+name+" is restricted. You must have access to it and be authenticated to access it. Please log in.", http.StatusUnauthorized)
		return nil
	}
	return repo
}

func (s *Server) storage(w http.ResponseWriter, r *http.Request, sum string) {
	s.mu.Lock()
	b, ok := s.blobs[sum]
	cut, stall := s.cutAfter, s.stallAfter
	s.cutAfter, s.stallAfter = 0, 0
	corrupt := s.corrupt
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	s.gets++
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 1
	}
	if stall > 0 && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:stall])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		return
	}
	if cut > 0 && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:cut])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(w, r, sum, time.Time{}, bytes.NewReader(b))
}
