package event

import (
	"bytes"
	"strings"

	ce "github.com/cloudevents/sdk-go/v2/event"
)

// sdkAccepts reports, for an event that passed this package's own checks
// (parseEnvelope up to the SDK), that the CloudEvents SDK's reader and
// Validate are sure to accept it too, so that sdkCheck need not build the
// SDK's event (a third of a duplicate's parse). It is one-sided: false only
// means "ask the SDK", whose word and message then decide as before, so an
// event's fate never depends on this function being complete, only on it
// being right when it says true. TestSDKAcceptsIsSound and FuzzSDKAccepts
// hold it to the SDK of go.mod.
//
// After our checks, what the SDK still refuses (its reader, then
// EventContextV1.Validate) is: an id, type or subject that is only white
// space (it trims with strings.TrimSpace); a source whose parsed URL writes
// nothing ("#", "//"); a datacontenttype it reads otherwise than we do (it
// trims it; a JSON type decides whether data is read as a string); a
// dataschema that is not an absolute URI by its own test; an extension its
// number reader or name rules refuse; data it reads as a string; a data
// number its skipping reader refuses (it reads a literal that begins with 0
// as a float32, so 0.4e39, which exactNumbers accepts, overflows); and the
// shapes sdkCopy exists for. Each of those is either checked exactly here or
// sent to the SDK.
func sdkAccepts(env *envelope) bool {
	if needsCopy(env.attrs) || present(env.attrs, "dataschema") {
		return false
	}
	if blank(env.ID) || blank(env.Type) || env.Subject != "" && blank(env.Subject) {
		return false
	}
	if env.source == nil || blank(env.source.String()) {
		return false
	}
	if strings.TrimSpace(env.DataContentType) != env.DataContentType || !isJSONMediaType(env.DataContentType) {
		return false
	}
	if raw, ok := env.attrs["data"]; ok && (jsonKind(raw) != '{' || zeroExponent(raw)) {
		return false
	}
	for name, raw := range env.attrs {
		if !specAttrs[name] && !sdkExtension(name, raw) {
			return false
		}
	}
	return true
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// sdkExtension: an extension extensionAttrs accepted that the SDK reads
// as it is: a string, a boolean, or an integer written as plain digits (its
// reader turns a number into a float64, exact for these). schemaurl and
// datacontentencoding are read otherwise when they come before specversion.
func sdkExtension(name string, raw []byte) bool {
	if name == "schemaurl" || name == "datacontentencoding" ||
		ce.MaxExtensionNameLength > 0 && len(name) > ce.MaxExtensionNameLength {
		return false
	}
	switch v := trimJSONSpace(raw); jsonKind(v) {
	case '"', 't', 'f':
		return true
	default:
		return plainInteger(v)
	}
}

// plainInteger: -?digits (extensionAttrs has held them to 32 bits).
func plainInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// zeroExponent reports whether the JSON text b holds, outside its strings,
// a number that begins with 0 and has an exponent: one the SDK reads as a
// float32 (sdkAccepts). Other numbers it reads as float64s or big floats,
// which hold every number exactNumbers accepts.
func zeroExponent(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(b) && strings.IndexByte("0123456789.eE+-", b[j]) >= 0 {
				j++
			}
			if c == '0' && bytes.ContainsAny(b[i:j], "eE") {
				return true
			}
			i = j - 1
		}
	}
	return false
}
