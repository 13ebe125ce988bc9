package llm

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gorun-dev/gorun/models"
)

// Errors callers branch on, through errors.Is. The errors returned wrap them and say more.
var (
	// ErrContextFull: tokens do not fit the session's context.
	ErrContextFull = errors.New("context is full")
	// ErrClosed: the model (or the session) was closed.
	ErrClosed = errors.New("model is closed")
	// ErrCancelled: the caller's context was cancelled or timed out (the error also matches
	// context.Canceled or context.DeadlineExceeded).
	ErrCancelled = errors.New("cancelled")
	// ErrBadFile: the file is not a valid model (malformed GGUF, missing or inconsistent
	// tensors or metadata, a bad saved session).
	ErrBadFile = errors.New("invalid model file")
	// ErrUnsupportedArchitecture: the file is a valid GGUF of an architecture gorun does not run.
	ErrUnsupportedArchitecture = models.ErrUnsupportedArchitecture
	// ErrUnsupportedType: a tensor has an element type gorun cannot compute with.
	ErrUnsupportedType = models.ErrUnsupportedType
	// ErrInvalidOption: an option is NaN, infinite or out of range.
	ErrInvalidOption = errors.New("invalid option")
	// ErrBusy: the session is running another call (from another goroutine, or from a
	// callback of its own Generate) that this one would interfere with.
	ErrBusy = errors.New("session is busy")
	// ErrSessionMismatch: a saved session belongs to another model or context length.
	ErrSessionMismatch = errors.New("saved session does not fit this model")
	// ErrNonFiniteLogits: the model computed a NaN or infinite logit (a broken model file or
	// backend); the sampler refuses to pick a token from it.
	ErrNonFiniteLogits = errors.New("non-finite logits")
)

// cancelled wraps a context's error so that it matches both ErrCancelled and the cause.
func cancelled(cause error) error { return fmt.Errorf("%w: %w", ErrCancelled, cause) }

// classify marks an error of loading a model as ErrBadFile unless it already says what kind
// of failure it is (an unsupported architecture or type, a file that could not be opened).
func classify(err error) error {
	if err == nil || errors.Is(err, ErrUnsupportedArchitecture) || errors.Is(err, ErrUnsupportedType) || errors.Is(err, ErrBadFile) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadFile, err)
}

// openError classifies an error of gguf.Open: a file that could not be opened or read keeps
// its own error (fs.ErrNotExist, fs.ErrPermission, ...); anything else is a bad file.
func openError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return classify(err)
}
