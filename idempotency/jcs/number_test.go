package jcs

import "strconv"

// appendNumber appends what Canonicalize writes for the finite double f, so
// the RFC 8785 Appendix B vectors in jcs_test.go check the number form the
// package really produces (jsontext's): f is written in Go's shortest
// round-tripping form and canonicalized as a JSON text.
func appendNumber(out []byte, f float64) []byte {
	c, err := Canonicalize(strconv.AppendFloat(nil, f, 'g', -1, 64))
	if err != nil {
		panic(err)
	}
	return append(out, c...)
}
