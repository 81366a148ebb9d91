package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// api is one forge's REST API: its base URL, how a request carries the
// token, and the HTTP client.
type api struct {
	base *url.URL
	auth func(http.Header)
	http *http.Client
}

// APIError is an answer of the forge other than 2xx.
type APIError struct {
	Method, Path string
	Status       int
	// Message is the forge's own message, cut short.
	Message string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case http.StatusUnauthorized:
		msg += " (the token of spec.previews.secretRef was refused)"
	case http.StatusForbidden:
		msg += " (the token lacks a permission, or a rate limit was hit)"
	case http.StatusNotFound:
		msg += " (check spec.previews.repository and apiURL, and that the token can see the repository)"
	}
	return msg
}

// IsNotFound reports whether err is the forge's 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// maxAnswer bounds an answer read (a page of files or comments).
const maxAnswer = 8 << 20

// do sends one request with in as its JSON body and decodes a JSON answer
// into out (both may be nil).
func (a *api) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	u := *a.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if strings.Contains(path, "%") {
		// A GitLab project path is escaped once, and must stay so.
		u.RawPath = strings.TrimSuffix(a.base.EscapedPath(), "/") + path
		u.Path, _ = url.PathUnescape(u.RawPath)
	}
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stackpilot")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	a.auth(req.Header)
	resp, err := a.http.Do(req)
	if err != nil {
		// The URL holds no credential (the token travels in a header).
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: forgeMessage(data)}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// forgeMessage is the "message" (or "error") of an error answer, one line
// of at most 200 characters.
func forgeMessage(data []byte) string {
	var m struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	_ = json.Unmarshal(data, &m)
	v := m.Message
	if v == nil {
		v = m.Error
	}
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case nil:
		return ""
	default:
		b, _ := json.Marshal(t)
		s = string(b)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// maxPages bounds a listing: 30 pages of 100.
const maxPages = 30

// pages calls list for page 1, 2, ... until a page has fewer than perPage
// items, and says whether the listing reached its end.
func pages(ctx context.Context, perPage int, list func(page int) (n int, err error)) (complete bool, err error) {
	for page := 1; page <= maxPages; page++ {
		n, err := list(page)
		if err != nil {
			return false, err
		}
		if n < perPage {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
	return false, nil
}

func pageQuery(sizeParam string, perPage, page int, extra ...string) url.Values {
	q := url.Values{sizeParam: {strconv.Itoa(perPage)}, "page": {strconv.Itoa(page)}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

// cut shortens s to n characters (runes), for fields forges bound.
func cut(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// upsert is every forge's way to keep one comment: edit comment id while
// it exists, else the comment whose body holds marker (find), else create
// one; it returns the comment's id.
func upsert(id, marker string, edit func(id string) error, find func(marker string) (string, error), create func() (string, error)) (string, error) {
	if id != "" {
		err := edit(id)
		if err == nil || !IsNotFound(err) {
			return id, err
		}
		// Deleted by a person: find ours, or write a new one.
	}
	found, err := find(marker)
	if err != nil {
		return "", err
	}
	if found != "" {
		return found, edit(found)
	}
	return create()
}
