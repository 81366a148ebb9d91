package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Client talks to one or more registries with one set of credentials.
type Client struct {
	Credentials *Credentials      // nil = anonymous
	Insecure    bool              // plain HTTP allowed (loopback registries); else HTTPS only
	Transport   http.RoundTripper // optional (tests count requests); default remote.DefaultTransport
	UserAgent   string
}

// RemoteOptions are the go-containerregistry options for this client,
// shared with internal/oci/cosign.
func (c *Client) RemoteOptions(ctx context.Context) []remote.Option {
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(c.Credentials.authenticator()),
		remote.WithTransport(c.transport()),
	}
	if c.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(c.UserAgent))
	}
	return opts
}

// NameOptions are the options to parse references for this client:
// name.Insecure when Insecure.
func (c *Client) NameOptions() []name.Option {
	opts := []name.Option{name.StrictValidation}
	if c.Insecure {
		opts = append(opts, name.Insecure)
	}
	return opts
}

// session is RemoteOptions with one shared Puller, so that the requests of
// one operation (manifest then blob, tags then manifests, HEAD then GET)
// ping and authenticate once rather than once each.
func (c *Client) session(ctx context.Context) []remote.Option {
	opts := c.RemoteOptions(ctx)
	p, err := remote.NewPuller(opts...)
	if err != nil {
		return opts // only fails on bad options, which each call reports again
	}
	return append(opts, remote.Reuse(p))
}

func (c *Client) transport() http.RoundTripper {
	rt := c.Transport
	if rt == nil {
		rt = remote.DefaultTransport
	}
	if c.Insecure {
		return rt
	}
	return httpsOnly{rt}
}

// httpsOnly refuses plain HTTP. go-containerregistry falls back to HTTP by
// itself for loopback and private addresses; without Insecure we never
// want credentials or artifacts to travel unencrypted.
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("refusing plain HTTP to %s: the registry is reached over HTTPS only unless insecure is set (meant for loopback test registries)", req.URL.Host)
	}
	return h.next.RoundTrip(req)
}

func (c *Client) repository(repository string) (name.Repository, error) {
	repo, err := name.NewRepository(repository, c.NameOptions()...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("invalid repository %q: %w", repository, err)
	}
	return repo, nil
}

func (c *Client) classify(err error, registry, ref string) error {
	return classify(err, registry, ref, c.Credentials == nil || c.Credentials.empty())
}

// Digest resolves ref to its manifest digest with one HEAD request (a GET
// when the registry does not answer HEAD). A digest reference is returned
// as is: a pin never moves.
func (c *Client) Digest(ctx context.Context, ref Reference) (string, error) {
	if ref.Digest != "" {
		return ref.Digest, nil
	}
	n, err := ref.name(c.NameOptions()...)
	if err != nil {
		return "", err
	}
	opts := c.session(ctx)
	desc, err := remote.Head(n, opts...)
	if err != nil {
		// Auth or not found: a GET would say the same. Asked by type, not
		// with cerr != err: a transport error can be a slice (multierrs),
		// and comparing it panics.
		cerr := c.classify(err, ref.Registry(), ref.String())
		var authErr *AuthError
		var notFound *NotFoundError
		if errors.As(cerr, &authErr) || errors.As(cerr, &notFound) {
			return "", cerr
		}
		got, gerr := remote.Get(n, opts...)
		if gerr != nil {
			return "", fmt.Errorf("resolving %s: %w", ref, c.classify(gerr, ref.Registry(), ref.String()))
		}
		return got.Digest.String(), nil
	}
	return desc.Digest.String(), nil
}

// ListTags lists the repository's tags, following the registry's pages.
func (c *Client) ListTags(ctx context.Context, repository string) ([]string, error) {
	return c.listTags(repository, c.session(ctx))
}

func (c *Client) listTags(repository string, opts []remote.Option) ([]string, error) {
	repo, err := c.repository(repository)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(repo, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing tags of %s: %w", repository, c.classify(err, repo.RegistryStr(), repository))
	}
	return tags, nil
}
