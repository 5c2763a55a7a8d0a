package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// maxDepth bounds JSON nesting; real events are a few levels deep. jsontext
// alone would allow 10000, so the bound is checked here.
const maxDepth = 512

// checkStrictJSON accepts exactly one JSON value (RFC 8259) in valid UTF-8
// with no object that repeats a key, nested at most maxDepth deep. Repeated
// keys are refused because parsers disagree on which copy wins (encoding/json
// keeps the last, others the first), so the event this package validates
// could differ from the one another component fingerprints or replays;
// RFC 8785 (JCS) also assumes I-JSON, which forbids them. Keys are compared
// decoded ("a" and "\u0061" are the same key).
//
// jsontext's defaults are exactly these rules, with one addition this
// package takes on purpose: a \u escape of an unpaired UTF-16 surrogate
// ("\ud800") is refused here as malformed_event. encoding/json would read it
// as U+FFFD, and the key derivation (package jcs) refuses it anyway, so
// accepting it only moved the same FINAL rejection later, to an
// invalid_request per task, while a surrogate outside the task data slipped
// through as U+FFFD.
func checkStrictJSON(b []byte) error {
	_, err := decode(b)
	return err
}

// decoded is a body read in the one strict pass: an object split into its
// members, an array into its elements, and every object that may be a
// CloudEvent (the body, a batch's element) with its data's members too, so
// that nothing after this pass reads the body again (the CloudEvents SDK
// aside, which judges the same bytes). Raw values are slices of the body.
type decoded struct {
	kind byte    // '{', '[', or another value's first byte
	obj  *object // kind '{'
	els  []element
}

type element struct {
	raw json.RawMessage
	obj *object // nil unless the element is an object
}

// object is a JSON object's members; data holds the members of its "data"
// member when that is an object.
type object struct {
	members map[string]json.RawMessage
	data    map[string]json.RawMessage
}

// MaxBatch is the most events a batch body may hold (each may call the
// model). The body's decode stops at the next one: splitting each element
// costs about 2 KB, so a 6 MiB body of {} would take gigabytes.
const MaxBatch = 100

// decode is the strict pass of checkStrictJSON, keeping what it read. An
// array is read whole, not split: only a body is a batch (decodeBody).
func decode(b []byte) (*decoded, error) { return decodeWith(b, -1) }

// decodeBody is decode for an invocation body: an array is split into its
// elements, at most MaxBatch of them (batch_too_large past that).
func decodeBody(b []byte) (*decoded, error) { return decodeWith(b, MaxBatch) }

// decodeWith splits an array into at most maxEls elements; -1: not at all.
func decodeWith(b []byte, maxEls int) (*decoded, error) {
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		return nil, newError(TypeMalformedEvent, "", "empty body")
	case !utf8.Valid(b):
		return nil, newError(TypeMalformedEvent, "", "body is not valid UTF-8")
	case jcs.NestedDeeper(b, maxDepth): // before jsontext, which would stop only at 10000
		return nil, newError(TypeMalformedEvent, "", "JSON nested deeper than %d levels", maxDepth)
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf)
	out, err := d.body(b, maxEls)
	if errors.Is(err, ErrBatchTooLarge) {
		return nil, err
	}
	if err == nil {
		if _, terr := d.dec.ReadToken(); terr == nil {
			return nil, newError(TypeMalformedEvent, "", "more than one JSON value in the body")
		} else if terr != io.EOF {
			err = terr
		}
	}
	if err != nil {
		return nil, syntaxError(b, err)
	}
	return out, nil
}

// decoder is a jsontext.Decoder reading a body in place, pooled because
// the strict pass runs on every delivery, duplicates included.
type decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// release drops the body before the decoder goes back to the pool.
func (d *decoder) release() {
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	decoders.Put(d)
}

func (d *decoder) body(b []byte, maxEls int) (*decoded, error) {
	out := &decoded{kind: jsonKind(b)}
	switch {
	case out.kind == '{':
		obj, _, err := d.object(b, true)
		out.obj = obj
		return out, err
	case out.kind == '[' && maxEls >= 0:
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		for k := d.dec.PeekKind(); k != ']'; k = d.dec.PeekKind() { // 0 on an error, which the next read returns
			if k != 0 && len(out.els) == maxEls {
				return nil, newError(TypeBatchTooLarge, "", "batch of more than %d events", maxEls)
			}
			var el element
			var err error
			if k == '{' {
				el.obj, el.raw, err = d.object(b, true)
			} else {
				el.raw, err = d.value(b)
			}
			if err != nil {
				return nil, err
			}
			out.els = append(out.els, el)
		}
		_, err := d.dec.ReadToken()
		return out, err
	}
	_, err := d.dec.ReadValue()
	return out, err
}

// object reads the object that comes next, member by member, descending
// into a "data" object when withData is set, and returns its text.
func (d *decoder) object(b []byte, withData bool) (*object, json.RawMessage, error) {
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	start := d.dec.InputOffset() - 1
	obj := &object{members: make(map[string]json.RawMessage, 16)}
	for d.dec.PeekKind() != '}' {
		key, err := d.name()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if withData && key == "data" && d.dec.PeekKind() == '{' {
			var data *object
			if data, v, err = d.object(b, false); err == nil {
				obj.data = data.members
			}
		} else {
			v, err = d.value(b)
		}
		if err != nil {
			return nil, nil, err
		}
		obj.members[key] = v
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	return obj, b[start:d.dec.InputOffset()], nil
}

// name reads the member name that comes next. One without escapes that
// events usually carry is taken from commonNames, without a copy: a
// duplicate's parse reads a score of them.
func (d *decoder) name() (string, error) {
	if d.dec.PeekKind() != '"' { // not a name: ReadToken says what is wrong
		t, err := d.dec.ReadToken()
		return t.String(), err
	}
	v, err := d.dec.ReadValue() // reads a name as ReadToken does, repeats refused
	if err != nil {
		return "", err
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 {
		if s, ok := commonNames[string(inner)]; ok {
			return s, nil
		}
		return string(inner), nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return string(s), err
}

// commonNames are the member names of EventBridge's CloudEvents and of the
// task data (docs/events.md), each its own value.
var commonNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype",
		"dataschema", "data", "data_base64", "aliyunaccountid", "aliyunpublishtime", "aliyunoriginalaccountid",
		"aliyuneventbusname", "aliyunregionid", "aliyunpublishaddr", "tenant_id", "task_type", "operation",
		"input", "input_version", "request_id", "idempotency_key", "notify"} {
		m[n] = n
	}
	return m
}()

func (d *decoder) value(b []byte) (json.RawMessage, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	end := d.dec.InputOffset()
	return b[end-int64(len(v)) : end], nil
}

// syntaxError words a jsontext error as a malformed_event; a repeated key is
// named in Field.
func syntaxError(b []byte, err error) error {
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) {
		return newError(TypeMalformedEvent, "", "not valid JSON: %v", err)
	}
	if errors.Is(err, jsontext.ErrDuplicateName) {
		key := serr.JSONPointer.LastToken()
		return newError(TypeMalformedEvent, key, "object repeats the key %q", key)
	}
	if at := serr.ByteOffset; at >= 0 && at < int64(len(b)) {
		if r, ok := escapedUnit(b[at:]); ok && utf16.IsSurrogate(r) {
			return newError(TypeMalformedEvent, "", "not valid JSON: the escape %s at offset %d is a UTF-16 surrogate without a valid pair (it names no character)", b[at:at+6], at)
		}
	}
	return newError(TypeMalformedEvent, "", "not valid JSON: %s", strings.TrimPrefix(err.Error(), "jsontext: "))
}

// escapedUnit decodes the \uXXXX escape s begins with.
func escapedUnit(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	u, err := strconv.ParseUint(string(s[2:6]), 16, 16)
	return rune(u), err == nil
}
