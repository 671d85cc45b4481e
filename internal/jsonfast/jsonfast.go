// Package jsonfast reads, by hand, JSON shaped as numatrace writes it:
// objects with known keys, unsigned integers, plain ASCII strings. A
// recording's kernel snapshots hold one histogram per thread and cause,
// and encoding/json's reflection and validation passes made decoding
// them a fifth of a replay's time.
//
// A Parser only says whether the input was in that plain shape; callers
// hand anything else to encoding/json, so results and errors stay
// encoding/json's.
package jsonfast

import "slices"

// Parser reads b from the start.
type Parser struct {
	b []byte
	i int
}

// New starts a parser on b.
func New(b []byte) *Parser { return &Parser{b: b} }

func (p *Parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// Byte consumes c, after any spaces, if it is next.
func (p *Parser) Byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// End reports whether only spaces are left.
func (p *Parser) End() bool {
	p.space()
	return p.i == len(p.b)
}

// Str reads a string of printable ASCII without escapes.
func (p *Parser) Str() (string, bool) {
	if !p.Byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '"' {
		if c := p.b[p.i]; c == '\\' || c < 0x20 || c >= 0x80 {
			return "", false
		}
		p.i++
	}
	if p.i == len(p.b) {
		return "", false
	}
	p.i++
	return string(p.b[start : p.i-1]), true
}

// Uint reads a number that is a plain unsigned integer (no sign, point,
// exponent or leading zero) of at most bits bits.
func (p *Parser) Uint(bits uint) (uint64, bool) {
	p.space()
	limit := ^uint64(0) >> (64 - bits)
	start := p.i
	var v uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
		p.i++
	}
	n := p.i - start
	if n == 0 || (n > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	return v, true
}

// UintKey reads an object key that is a plain unsigned integer of at
// most bits bits, as encoding/json writes integer map keys.
func (p *Parser) UintKey(bits uint) (uint64, bool) {
	if !p.Byte('"') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] < '0' || p.b[p.i] > '9') { // no spaces inside
		return 0, false
	}
	v, ok := p.Uint(bits)
	return v, ok && p.i < len(p.b) && p.b[p.i] == '"' && p.Byte('"')
}

// Bool reads true or false.
func (p *Parser) Bool() (v, ok bool) {
	p.space()
	for _, lit := range [...]string{"true", "false"} {
		if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// Object reads an object, calling value for each key with the parser at
// the key's value, which value must read; ok is false when the object is
// malformed or value says so. A key given twice is not taken either
// (encoding/json merges or overwrites, depending on the type), nor an
// object of more than maxKeys keys.
func (p *Parser) Object(value func(key string) bool) bool {
	if !p.Byte('{') {
		return false
	}
	if p.Byte('}') {
		return true
	}
	var seen [maxKeys]string
	for n := 0; ; n++ {
		key, ok := p.Str()
		if !ok || n == maxKeys || slices.Contains(seen[:n], key) || !p.Byte(':') || !value(key) {
			return false
		}
		seen[n] = key
		if p.Byte('}') {
			return true
		}
		if !p.Byte(',') {
			return false
		}
	}
}

// maxKeys bounds an Object's keys: the structs numatrace writes have a
// dozen at most.
const maxKeys = 16

// UintObject is Object for integer keys.
func (p *Parser) UintObject(bits uint, value func(key uint64) bool) bool {
	return p.object(func() bool {
		key, ok := p.UintKey(bits)
		return ok && p.Byte(':') && value(key)
	})
}

func (p *Parser) object(member func() bool) bool {
	if !p.Byte('{') {
		return false
	}
	if p.Byte('}') {
		return true
	}
	for {
		if !member() {
			return false
		}
		if p.Byte('}') {
			return true
		}
		if !p.Byte(',') {
			return false
		}
	}
}

// Array reads an array, calling elem with the parser at each element.
func (p *Parser) Array(elem func(i int) bool) bool {
	if !p.Byte('[') {
		return false
	}
	if p.Byte(']') {
		return true
	}
	for i := 0; ; i++ {
		if !elem(i) {
			return false
		}
		if p.Byte(']') {
			return true
		}
		if !p.Byte(',') {
			return false
		}
	}
}

// Raw reads any one value of numbers, literals, plain strings, arrays and
// objects, and returns its bytes: for encoding/json to decode a small part.
func (p *Parser) Raw() ([]byte, bool) {
	p.space()
	start := p.i
	ok := p.skip(0)
	return p.b[start:p.i], ok
}

func (p *Parser) skip(depth int) bool {
	if depth > 64 {
		return false
	}
	p.space()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.Object(func(string) bool { return p.skip(depth + 1) })
	case c == '[':
		return p.Array(func(int) bool { return p.skip(depth + 1) })
	case c == '"':
		_, ok := p.Str()
		return ok
	case c == 't' || c == 'f':
		_, ok := p.Bool()
		return ok
	case c == 'n':
		if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
			p.i += 4
			return true
		}
		return false
	case c == '-' || (c >= '0' && c <= '9'):
		for p.i < len(p.b) && (p.b[p.i] == '-' || p.b[p.i] == '+' || p.b[p.i] == '.' ||
			p.b[p.i] == 'e' || p.b[p.i] == 'E' || (p.b[p.i] >= '0' && p.b[p.i] <= '9')) {
			p.i++
		}
		return true // encoding/json judges the number
	}
	return false
}
