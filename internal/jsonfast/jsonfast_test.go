package jsonfast

import (
	"reflect"
	"testing"
)

func TestUint(t *testing.T) {
	for _, c := range []struct {
		in   string
		bits uint
		want uint64
		ok   bool
	}{
		{"0", 64, 0, true}, {" 42", 64, 42, true}, {"18446744073709551615", 64, 1<<64 - 1, true},
		{"18446744073709551616", 64, 0, false}, {"255", 8, 255, true}, {"256", 8, 0, false},
		{"4294967295", 32, 1<<32 - 1, true}, {"4294967296", 32, 0, false}, {"01", 64, 0, false},
		{"-1", 64, 0, false}, {"1.0", 64, 0, false}, {"1e3", 64, 0, false}, {"", 64, 0, false}, {"x", 64, 0, false},
	} {
		p := New([]byte(c.in))
		v, ok := p.Uint(c.bits)
		if ok != c.ok || (ok && (v != c.want || !p.End())) {
			t.Errorf("Uint(%q, %d) = %d, %v; want %d, %v", c.in, c.bits, v, ok, c.want, c.ok)
		}
	}
}

func TestObjectsArraysAndRaw(t *testing.T) {
	p := New([]byte(` { "a" : [1, 2] , "7" : {"x": true}, "s": "plain", "r": {"k": [null, "q", -1.5e3, {"n": {}}]} } `))
	var got []string
	var arr []uint64
	ok := p.Object(func(key string) bool {
		got = append(got, key)
		switch key {
		case "a":
			return p.Array(func(int) bool { v, ok := p.Uint(64); arr = append(arr, v); return ok })
		case "7":
			return p.Object(func(k string) bool { b, ok := p.Bool(); return ok && b && k == "x" })
		case "s":
			s, ok := p.Str()
			return ok && s == "plain"
		case "r":
			raw, ok := p.Raw()
			return ok && string(raw) == `{"k": [null, "q", -1.5e3, {"n": {}}]}`
		}
		return false
	})
	if !ok || !p.End() || !reflect.DeepEqual(got, []string{"a", "7", "s", "r"}) || !reflect.DeepEqual(arr, []uint64{1, 2}) {
		t.Fatalf("ok %v end %v keys %v array %v", ok, p.End(), got, arr)
	}
	var keys []uint64
	if p := New([]byte(`{"3":{},"255":{}}`)); !p.UintObject(8, func(k uint64) bool { keys = append(keys, k); return p.Object(func(string) bool { return false }) }) || !reflect.DeepEqual(keys, []uint64{3, 255}) {
		t.Fatalf("integer keys %v", keys)
	}
	// What it does not take, so encoding/json gets it.
	for _, in := range []string{`{"a\"b":1}`, `{"é":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":1`, `{"a":["x",]}`, `{"a":1}}`} {
		p := New([]byte(in))
		if p.Object(func(string) bool { _, ok := p.Raw(); return ok }) && p.End() {
			t.Errorf("%s taken as an object", in)
		}
	}
	for _, in := range []string{`{" 3":1}`, `{"3 ":1}`, `{"256":1}`, `{"03":1}`, `{"x":1}`} {
		p := New([]byte(in))
		if p.UintObject(8, func(uint64) bool { _, ok := p.Raw(); return ok }) && p.End() {
			t.Errorf("%s taken as an object with 8-bit integer keys", in)
		}
	}
}
