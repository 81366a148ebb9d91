package gitserver

import (
	"context"
	"io"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

// receive answers a push with go-git's receive-pack: it stores the pack,
// updates the refs and reports the status of each.
func receive(ctx context.Context, w io.Writer, st storer.Storer, body io.Reader) error {
	req := packp.NewReferenceUpdateRequest()
	if err := req.Decode(body); err != nil {
		return &badRequestError{err}
	}
	sess, err := server.NewServer(storageLoader{st}).NewReceivePackSession(&transport.Endpoint{}, nil)
	if err != nil {
		return err
	}
	status, err := sess.ReceivePack(ctx, req)
	if status != nil {
		if eerr := status.Encode(w); err == nil {
			err = eerr
		}
	}
	return err
}

// storageLoader hands go-git's server the repository already opened.
type storageLoader struct{ st storer.Storer }

func (l storageLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.st, nil }
