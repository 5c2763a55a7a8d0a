package ossfake_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

func md5b64(b []byte) string {
	s := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func md5hexUpper(b []byte) string {
	s := md5.Sum(b)
	return strings.ToUpper(hex.EncodeToString(s[:]))
}
