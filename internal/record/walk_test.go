package record

import "io"

// nextBlock reads and decompresses r's next good block, for tests that
// walk its records one by one.
func nextBlock(r *Reader) (*blockDecoder, error) {
	for {
		j := r.readBlockNew()
		if j.end {
			return nil, io.EOF
		}
		raw, err := r.zdec.DecodeAll(j.payload, nil)
		if err == nil && len(raw) == int(j.h.Raw) {
			r.blocks++
			return newBlockDecoder(raw), nil
		}
	}
}
