package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// Sessions: a browser signs in once with a bearer token (`stackpilot
// dashboard` hands it over), and gets a cookie that names a session kept
// here, in memory: the token never goes back to the browser, and a
// controller restart signs everyone out. State-changing requests made with
// the cookie must also carry the session's CSRF token in a header, which a
// page of another site cannot read or set (the cookie is SameSite=Strict
// besides).

// sessionCookie is the cookie's name.
const sessionCookie = "stackpilot_session"

// csrfHeader carries the session's CSRF token on state-changing requests.
const csrfHeader = "X-Stackpilot-CSRF"

// sessionTTL is how long a session lasts without a new sign-in.
const sessionTTL = 8 * time.Hour

type session struct {
	id, csrf string
	// token is reviewed again at each request (Access caches the answer a
	// minute), so a revoked token ends the session.
	token   string
	expires time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// start makes a session for token.
func (s *sessions) start(token string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*session{}
	}
	now := s.clock()
	if len(s.m) >= maxRemembered {
		for id, x := range s.m {
			if now.After(x.expires) {
				delete(s.m, id)
			}
		}
	}
	x := &session{id: randomString(), csrf: randomString(), token: token, expires: now.Add(sessionTTL)}
	s.m[x.id] = x
	return x
}

// get is the live session of id, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.m[id]
	if x == nil || s.clock().After(x.expires) {
		delete(s.m, id)
		return nil
	}
	return x
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// csrfOK compares in constant time.
func (x *session) csrfOK(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(x.csrf)) == 1
}

// Sign-in codes: `stackpilot dashboard` trades the user's bearer token
// (sent in a header, never in a URL) for a code that opens one session,
// once, within a minute; the URL it opens carries that code, not the token.

// codeTTL is how long a sign-in code may be used.
const codeTTL = time.Minute

type code struct {
	token   string
	expires time.Time
}

type codes struct {
	mu  sync.Mutex
	m   map[string]code
	now func() time.Time
}

func (c *codes) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// issue makes a code for token.
func (c *codes) issue(token string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]code{}
	}
	now := c.clock()
	for k, v := range c.m {
		if now.After(v.expires) {
			delete(c.m, k)
		}
	}
	k := randomString()
	c.m[k] = code{token: token, expires: now.Add(codeTTL)}
	return k
}

// redeem is the token of code k, once; "" when unknown, used or expired.
func (c *codes) redeem(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	delete(c.m, k)
	if !ok || c.clock().After(v.expires) {
		return ""
	}
	return v.token
}
