package notify_test

import (
	"io"
	"net/http"
	"os"
	"time"

	"github.com/idemgate/idemgate/handler/notify"
)

// A receiver checks the signature over the raw body before decoding it, and
// drops a repeated Idempotency-Key (docs/operations.md, "Notify security").
func ExampleVerify() {
	secret := os.Getenv("NOTIFY_SIGNING_SECRET")
	http.HandleFunc("/idemgate", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read error", http.StatusBadRequest)
			return
		}
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// … json.Unmarshal(body, &outcome); dedupe on r.Header.Get("Idempotency-Key") …
		w.WriteHeader(http.StatusNoContent)
	})
}
