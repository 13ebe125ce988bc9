//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (posix_openpt, unlockpt and ptsname by hand: the Linux
// ioctls TIOCSPTLCK and TIOCGPTN). It skips the test when the machine has none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n uint32
	var ioErr error
	rc, err := master.SyscallConn() // not Fd(), which would make the master blocking
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			if ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioErr == nil {
				n, ioErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
			}
		})
	}
	if err == nil {
		err = ioErr
	}
	if err != nil {
		master.Close()
		t.Skipf("no usable pseudo-terminal: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Skipf("cannot open the pseudo-terminal's slave: %v", err)
	}
	return master, slave
}

// ptyProcess is gorun on a terminal of its own, as a user runs it: the slave is its
// controlling terminal and its stdin, stdout and stderr, so that typing 0x03 sends it SIGINT
// and 0x04 at the start of a line ends its input.
type ptyProcess struct {
	t      *testing.T
	master *os.File
	chunks chan []byte // what gorun writes (and the terminal echoes)
	raw    []byte
	seen   int // readUntil's position in the text
	exited chan struct{}
	code   int
}

func startPTY(t *testing.T, args ...string) *ptyProcess {
	t.Helper()
	master, slave := openPTY(t)
	cmd := gorunProcess(args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		slave.Close()
		t.Fatal(err)
	}
	slave.Close() // the child holds it; the master reads EIO once the child is gone
	p := &ptyProcess{t: t, master: master, chunks: make(chan []byte, 64), exited: make(chan struct{})}
	go func() {
		defer close(p.chunks)
		for {
			b := make([]byte, 4096)
			n, err := master.Read(b)
			if n > 0 {
				p.chunks <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		master.Close()
	})
	return p
}

// text is everything read so far, with the terminal's "\r\n" as "\n".
func (p *ptyProcess) text() string { return strings.ReplaceAll(string(p.raw), "\r\n", "\n") }

// readUntil reads until want appears after what earlier calls consumed, and returns the text
// up to the end of it. It fails the test after d.
func (p *ptyProcess) readUntil(want string, d time.Duration) string {
	p.t.Helper()
	return p.readUntilFunc(fmt.Sprintf("%q", want), d, func(s string) int {
		if i := strings.Index(s, want); i >= 0 {
			return i + len(want)
		}
		return -1
	})
}

// readUntilFunc reads until end (given the text not consumed yet) returns where what it waits
// for ends, and returns the text up to there.
func (p *ptyProcess) readUntilFunc(what string, d time.Duration, end func(string) int) string {
	p.t.Helper()
	deadline := time.After(d)
	for {
		s := p.text()[p.seen:]
		if i := end(s); i >= 0 {
			p.seen += i
			return s[:i]
		}
		select {
		case b, ok := <-p.chunks:
			if !ok {
				p.t.Fatalf("gorun ended (exit %s) before %s; it wrote:\n%s", p.exitCode(), what, p.text())
			}
			p.raw = append(p.raw, b...)
		case <-deadline:
			p.t.Fatalf("no %s within %v; gorun wrote:\n%s", what, d, p.text())
		}
	}
}

func (p *ptyProcess) exitCode() string {
	select {
	case <-p.exited:
		return fmt.Sprint(p.code)
	default:
		return "still running"
	}
}

// write types b on the terminal.
func (p *ptyProcess) write(b string) {
	p.t.Helper()
	if _, err := p.master.Write([]byte(b)); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for gorun to exit, reading the rest of its output, and returns its exit status.
func (p *ptyProcess) wait(d time.Duration) int {
	p.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case b, ok := <-p.chunks:
			if !ok {
				select {
				case <-p.exited:
					return p.code
				case <-deadline:
					p.t.Fatalf("gorun did not exit within %v; it wrote:\n%s", d, p.text())
				}
			}
			p.raw = append(p.raw, b...)
		case <-deadline:
			p.t.Fatalf("gorun did not exit within %v; it wrote:\n%s", d, p.text())
		}
	}
}
