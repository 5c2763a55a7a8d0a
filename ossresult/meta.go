package ossresult

import (
	"crypto/md5"
	"hash/crc64"
)

// Meta is the metadata every result object carries (docs/design.md §8); on OSS
// they are x-oss-meta-idempotency-key and x-oss-meta-request-id.
type Meta struct {
	IdempotencyKey string
	RequestID      string
}

// User-metadata names, without OSS's x-oss-meta- prefix.
const (
	metaIdempotencyKey = "idempotency-key"
	metaRequestID      = "request-id"
)

// maxMetaLen bounds each value well inside OSS's 8 KB of user metadata.
const maxMetaLen = 1024

// checkPut keeps the content type and metadata to printable ASCII: they
// travel as HTTP header values, which OSS neither escapes nor accepts as
// arbitrary bytes (and CR/LF would forge headers).
func checkPut(contentType string, m Meta) error {
	for _, v := range []string{contentType, m.IdempotencyKey, m.RequestID} {
		if len(v) > maxMetaLen {
			return invalid("header value longer than %d bytes", maxMetaLen)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return invalid("header value %q is not printable ASCII", v)
			}
		}
	}
	return nil
}

// crcTable is CRC-64/ECMA-182 as OSS reports it in x-oss-hash-crc64ecma.
var crcTable = crc64.MakeTable(crc64.ECMA)

func crc64Of(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

func md5Of(b []byte) [md5.Size]byte { return md5.Sum(b) }
