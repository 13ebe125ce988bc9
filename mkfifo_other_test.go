//go:build !unix

package main

import "errors"

// mkfifo: there are no named pipes in the file system here; the tests that need one skip.
func mkfifo(string) error { return errors.New("no FIFOs on this system") }
