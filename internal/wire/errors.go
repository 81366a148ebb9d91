package wire

import (
	"encoding/json"
	"net/http"
)

// errorBody is every refusal's body: {"error": "..."}. A client tells the
// controller's own answers from the API server's (on the way through the
// service proxy) by it.
type errorBody struct {
	Error string `json:"error"`
}

// WriteError answers code with msg as an error body.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", ContentJSON)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg})
}

// ReadError is the message of an error body, and false when body is not
// one (another server's answer, or an empty message).
func ReadError(body []byte) (string, bool) {
	var e errorBody
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return "", false
	}
	return e.Error, true
}
