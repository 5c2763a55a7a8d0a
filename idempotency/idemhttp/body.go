package idemhttp

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
)

// DefaultMaxBody bounds a request body the middleware reads (1 MiB).
const DefaultMaxBody = 1 << 20

// ReadBody reads r's body up to limit bytes; with jsonOnly it must be
// application/json (else 415) holding one JSON value (else 400); a body
// that could not be read to its end is 408. The problem is nil when the
// body is usable.
func ReadBody(r *http.Request, limit int64, jsonOnly bool) ([]byte, *Problem) {
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	if jsonOnly && !isJSON(r.Header.Get("Content-Type")) {
		p := ProblemUnsupportedMedia
		return nil, &p
	}
	if r.ContentLength > limit {
		p := BodyTooLargeProblem(limit)
		return nil, &p
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || int64(len(body)) > limit:
		p := BodyTooLargeProblem(limit)
		return nil, &p
	case err != nil: // the transport's failure, not the request's
		p := BodyIncompleteProblem()
		return nil, &p
	case jsonOnly && !json.Valid(body):
		p := MalformedBodyProblem("the body is not valid JSON")
		return nil, &p
	}
	return body, nil
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json"))
}
