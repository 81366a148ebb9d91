package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// gcsStore is a gs:// backend's bucket, read through the Cloud Storage JSON
// API (https://cloud.google.com/storage/docs/json_api): list, read and
// delete objects, nothing else. With STORAGE_EMULATOR_HOST set it talks to
// that host over plain HTTP without credentials, as Google's client
// libraries (and so the CLI) do.
type gcsStore struct {
	client *http.Client
	base   string // .../storage/v1/b/<bucket>/o
	prefix string // the backend URL's path: every key starts with it
}

// gcsReadWriteScope is the scope the CLI asks its credentials for.
const gcsReadWriteScope = "https://www.googleapis.com/auth/devstorage.read_write"

func openGCS(ctx context.Context, u *url.URL) (objectStore, error) {
	if u.Host == "" {
		return nil, errors.New("a gs:// backend URL names its bucket: gs://<bucket>[/<folder>]")
	}
	s := &gcsStore{prefix: bucketPrefix(u)}
	endpoint := "https://storage.googleapis.com"
	if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
		endpoint = "http://" + strings.TrimPrefix(host, "http://")
		s.client = &http.Client{}
	} else {
		creds, err := googleCredentials(ctx)
		if err != nil {
			return nil, err
		}
		// The token source outlives ctx: the store is used after open.
		s.client = oauth2.NewClient(context.Background(), creds.TokenSource)
	}
	s.base = endpoint + "/storage/v1/b/" + url.PathEscape(u.Host) + "/o"
	return s, nil
}

// googleCredentials resolves a gs:// backend's credentials in the CLI's
// order (pkg/authhelpers, ResolveGoogleCredentials): the JSON of a key in
// GOOGLE_CREDENTIALS, an access token in GOOGLE_OAUTH_ACCESS_TOKEN, else the
// application default credentials (GOOGLE_APPLICATION_CREDENTIALS, the
// gcloud config, the metadata server: workload identity in a Pod).
func googleCredentials(ctx context.Context) (*google.Credentials, error) {
	if key := os.Getenv("GOOGLE_CREDENTIALS"); key != "" {
		// Any type the CLI takes, as the JSON says: it is the Stack's own
		// credential, from its own environment.
		var typed struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(key), &typed)
		creds, err := google.CredentialsFromJSONWithType(ctx, []byte(key), google.CredentialsType(typed.Type), gcsReadWriteScope)
		if err != nil {
			return nil, fmt.Errorf("GOOGLE_CREDENTIALS does not hold a credentials JSON: %w", err)
		}
		return creds, nil
	}
	if token := os.Getenv("GOOGLE_OAUTH_ACCESS_TOKEN"); token != "" {
		return &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token})}, nil
	}
	creds, err := google.FindDefaultCredentials(ctx, gcsReadWriteScope)
	if err != nil {
		return nil, fmt.Errorf("no Google credentials (set GOOGLE_CREDENTIALS, GOOGLE_OAUTH_ACCESS_TOKEN or GOOGLE_APPLICATION_CREDENTIALS): %w", err)
	}
	return creds, nil
}

func (s *gcsStore) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	page := ""
	for {
		q := url.Values{"prefix": {s.prefix + prefix}, "fields": {"items(name),nextPageToken"}}
		if page != "" {
			q.Set("pageToken", page)
		}
		var listing struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		body, err := s.do(ctx, http.MethodGet, s.base+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(body, &listing); err != nil {
			return nil, fmt.Errorf("the object listing does not parse: %w", err)
		}
		for _, item := range listing.Items {
			keys = append(keys, strings.TrimPrefix(item.Name, s.prefix))
		}
		if listing.NextPageToken == "" {
			return keys, nil
		}
		page = listing.NextPageToken
	}
}

func (s *gcsStore) object(key string) string {
	return s.base + "/" + url.PathEscape(s.prefix+key)
}

func (s *gcsStore) read(ctx context.Context, key string) ([]byte, error) {
	return s.do(ctx, http.MethodGet, s.object(key)+"?alt=media")
}

func (s *gcsStore) remove(ctx context.Context, key string) error {
	_, err := s.do(ctx, http.MethodDelete, s.object(key))
	return err
}

func (s *gcsStore) close() error {
	s.client.CloseIdleConnections()
	return nil
}

// do sends one request and returns the body of a 2xx answer; a 404 is
// errObjectGone, any other status an error with the service's message.
func (s *gcsStore) do(ctx context.Context, method, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errObjectGone
	case resp.StatusCode/100 != 2:
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return nil, fmt.Errorf("the Cloud Storage API answered %s: %s", resp.Status, msg)
	}
	return body, nil
}
