package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// follower reads one latency file (or standard input) line by line, as
// tail -F does: as it grows, and by name across rotation.
type follower struct {
	path   string // as the user named it, for what is said
	name   string // the file's own name, its links resolved at the start
	notice func(error)
	in     io.Reader
	f      *os.File // nil for standard input
	stream bool     // standard input: its end is the end
	// regular is a regular file, which can be rotated or truncated; a
	// FIFO or a device cannot.
	regular bool
	info    os.FileInfo // of f, to tell a new file by the same name
	off     int64       // bytes of f read so far
	last    []byte      // the last bytes read, up to lastBytes: to find them in a copy
	// draining: a new file has taken the name, and the old one is read
	// to its end before the new one.
	draining bool
	refused  os.FileInfo // what was last refused at the name: said once

	r        *bufio.Reader
	out      chan<- fileLine
	done     <-chan struct{}
	partial  []byte // the line being read
	skipping bool   // in a line over maxLine, up to its newline
}

// pollEvery is how often the end of a file is looked at again.
const pollEvery = 50 * time.Millisecond

// start opens the file the user named. Links in its path are theirs,
// resolved once, here: from then on the file is followed by its own name,
// and at rotation what takes that name is opened without following links.
// A FIFO is read as it is given, a device never.
func (fl *follower) start() error {
	name, err := filepath.EvalSymlinks(fl.path)
	if err != nil {
		return fmt.Errorf("latency file: %w", err)
	}
	fl.name = name
	return fl.open(true)
}

// open opens fl.name, refusing, before it is opened, what is not a
// regular file (or a FIFO, with fifo) and a link: a device is never
// opened. A FIFO opens without waiting for its writer (reads then find
// nothing until one comes).
func (fl *follower) open(fifo bool) error {
	st, err := os.Lstat(fl.name)
	if err != nil {
		return fmt.Errorf("latency file: %w", err)
	}
	if r := fl.refusalOf(st, fifo); r != nil {
		return r
	}
	f, err := os.OpenFile(fl.name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if errors.Is(err, syscall.ELOOP) { // a link put there since the look
		info, _ := os.Lstat(fl.name)
		return &refusal{path: fl.path, what: "a symbolic link", info: info}
	}
	if err != nil {
		return fmt.Errorf("latency file: %w", err)
	}
	info, err := f.Stat()
	if err == nil && !os.SameFile(st, info) {
		err = fmt.Errorf("latency file %s was replaced while being opened", fl.path)
	}
	if err != nil {
		f.Close()
		return err
	}
	fl.f, fl.in, fl.info, fl.off, fl.regular = f, f, info, 0, info.Mode().IsRegular()
	fl.last = fl.last[:0]
	return nil
}

// refusalOf refuses a file that is not read: anything but a regular
// file, or a FIFO when fifo. nil when it is read.
func (fl *follower) refusalOf(st os.FileInfo, fifo bool) *refusal {
	m := st.Mode()
	if m.IsRegular() || (fifo && m&os.ModeNamedPipe != 0) {
		return nil
	}
	return &refusal{path: fl.path, what: fileKind(m), info: st}
}

// refusal is a file at the latency file's name that is not read.
type refusal struct {
	path, what string      // what: "a character device"
	info       os.FileInfo // nil when not known
}

func (r *refusal) Error() string {
	return "latency file " + r.path + " is " + r.what + ": not read; give a regular file, a FIFO or - (standard input)"
}

// fileKind names a type of file that is not a regular file.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "of type " + m.Type().String()
}

// readLines sends whole lines until ctx ends; at the end of a growing file
// it waits for more, at the end of a stream it stops.
func (fl *follower) readLines(ctx context.Context, out chan<- fileLine) error {
	if fl.regular {
		defer func() { fl.f.Close() }()
	}
	fl.r, fl.out, fl.done = bufio.NewReaderSize(fl.in, maxLine), out, ctx.Done()
	for ctx.Err() == nil {
		frag, err := fl.r.ReadSlice('\n')
		fl.took(frag)
		switch {
		case err == nil: // a newline
			fl.endLine()
		case errors.Is(err, bufio.ErrBufferFull):
			// More of the same line.
		case err == io.EOF:
			// A line still being written, the end of a stream, or of a
			// file that was rotated or truncated.
			if fl.stream && len(frag) == 0 {
				return nil
			}
			if again, err := fl.atEnd(); err != nil || again {
				if err != nil {
					return err
				}
				continue
			}
			select {
			case <-ctx.Done():
			case <-time.After(pollEvery):
			}
		default:
			if ctx.Err() != nil {
				return nil // closed as Follow returned
			}
			return fmt.Errorf("latency file: %w", err)
		}
	}
	return nil
}

// took adds what was read to the line being read.
func (fl *follower) took(frag []byte) {
	fl.off += int64(len(frag))
	if fl.regular {
		fl.last = append(fl.last, frag...)
		if n := len(fl.last); n > 2*lastBytes {
			fl.last = append(fl.last[:0], fl.last[n-lastBytes:]...)
		}
	}
	if !fl.skipping {
		fl.partial = append(fl.partial, frag...)
	}
	if len(fl.partial) > maxLine {
		fl.partial, fl.skipping = fl.partial[:0], true
	}
}

// endLine sends the line read, up to its newline.
func (fl *follower) endLine() {
	l := fileLine{text: string(fl.partial), long: fl.skipping}
	fl.partial, fl.skipping = fl.partial[:0], false
	select {
	case fl.out <- l:
	case <-fl.done:
	}
}

// restart reads fl.in from its start; a line left unfinished is sent as
// it is.
func (fl *follower) restart() {
	if len(fl.partial) > 0 && !fl.skipping {
		fl.endLine()
	}
	fl.partial, fl.skipping = fl.partial[:0], false
	fl.r.Reset(fl.in)
}

// atEnd looks at the file's name once all of the file was read: when a
// new file has taken it (rotated), the old one is read to its end and
// then the new one from its start; when the file shrank below what was
// read, or no longer holds what was read (truncated and written again),
// it is read again from its start. again says to read on at once.
func (fl *follower) atEnd() (again bool, err error) {
	if !fl.regular {
		return false, nil
	}
	if fl.draining { // the old file is read to its end: on to the new one
		old := fl.f
		if err := fl.open(false); err != nil {
			var r *refusal
			if errors.As(err, &r) { // not read: back to looking at the name
				fl.draining = false
				fl.refuse(r)
			}
			return false, nil // read on in the old one
		}
		old.Close()
		fl.draining = false
		fl.restart()
		return true, nil
	}
	st, err := os.Lstat(fl.name)
	switch {
	case err != nil:
		return false, nil // moved away, the new one not yet there: read on in the old one
	case os.SameFile(fl.info, st):
		if st.Size() < fl.off || !fl.unchanged() {
			return true, fl.rewind()
		}
	case !st.Mode().IsRegular():
		fl.refuse(fl.refusalOf(st, false))
	default:
		fl.say("rotated", "a new file took its name: reading the old one to its end, then the new one from its start")
		fl.draining = true
		return true, nil
	}
	return false, nil
}

// rewind reads the file again from its start: it was truncated.
func (fl *follower) rewind() error {
	fl.truncated()
	if _, err := fl.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("latency file: %w", err)
	}
	fl.off, fl.last = 0, fl.last[:0]
	fl.restart()
	return nil
}

// refuse says, once for each file, that what took the name at rotation is
// not read (a link to a file only root may read, to /dev/zero; a FIFO):
// reading goes on in the old file, and the name is looked at again.
func (fl *follower) refuse(r *refusal) {
	if r.info != nil && fl.refused != nil && os.SameFile(r.info, fl.refused) {
		return
	}
	fl.refused = r.info
	how, reading := "not read", "reading goes on in the old file until a regular file takes the name"
	if r.what == "a symbolic link" {
		how = "not followed"
	}
	fl.say("replaced by "+r.what, how+"; "+reading)
}

// unchanged reports whether the file still holds what was read last
// where it was read: a file truncated and written again past that point
// before this look does not.
func (fl *follower) unchanged() bool {
	seen := fl.last[max(0, len(fl.last)-lastBytes):]
	at := make([]byte, len(seen))
	_, err := fl.f.ReadAt(at, fl.off-int64(len(seen)))
	return err != nil || bytes.Equal(at, seen)
}

// truncated takes what the truncation cut before it was read (the lines
// written since the last read) from the copy copytruncate made, if there
// is one, and says so.
func (fl *follower) truncated() {
	name, rest := fl.fromCopy()
	if name == "" {
		fl.say("truncated", "reading it again from its start (lines written to it since the last read, a few ms of them, went with the truncation)")
		return
	}
	fl.say("truncated", "reading it again from its start (what it held that was not yet read came from its copy "+name+")")
	for len(rest) > 0 {
		line, more, nl := bytes.Cut(rest, []byte("\n"))
		if nl {
			line = rest[:len(line)+1]
		}
		fl.took(line)
		if nl {
			fl.endLine()
		}
		rest = more
	}
}

// lastBytes is how much of what was read last is kept to recognise a
// copy of the file.
const lastBytes = 4096

// maxUnread bounds what is taken from a truncated file's copy.
const maxUnread = 16 << 20

// fromCopy finds the copy copytruncate made of the file just before
// cutting it (a file beside it, named after it, that holds what was read
// at the same offset) and returns its name and what it holds past what
// was read. "" when there is no such copy.
func (fl *follower) fromCopy() (string, []byte) {
	dir, base := filepath.Dir(fl.name), filepath.Base(fl.name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil
	}
	seen := fl.last[max(0, len(fl.last)-lastBytes):]
	for _, e := range ents {
		name := e.Name()
		if name == base || !strings.HasPrefix(name, base) || !e.Type().IsRegular() {
			continue
		}
		if rest, ok := unreadIn(filepath.Join(dir, name), fl.off, seen); ok {
			return name, rest
		}
	}
	return "", nil
}

// unreadIn returns what path holds past off, if the bytes just before off
// are seen.
func unreadIn(path string, off int64, seen []byte) ([]byte, bool) {
	// Not through a link, nor from a FIFO put there since the listing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	at := make([]byte, len(seen))
	if _, err := f.ReadAt(at, off-int64(len(seen))); err != nil || !bytes.Equal(at, seen) {
		return nil, false
	}
	rest, err := io.ReadAll(io.NewSectionReader(f, off, maxUnread))
	return rest, err == nil
}

// Moved is what Follow notices of a file it follows: it was rotated or
// truncated, or what took its name is not read.
type Moved struct {
	Path    string
	How     string // "rotated", "truncated", "replaced by a symbolic link"...
	Reading string // how reading goes on
}

func (m *Moved) Error() string { return m.Path + " was " + m.How + ": " + m.Reading }

func (fl *follower) say(how, reading string) {
	if fl.notice != nil {
		fl.notice(&Moved{Path: fl.path, How: how, Reading: reading})
	}
}
