package gitserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/utils/ioutil"
)

// openStorage opens the bare repository at dir; a directory that is not one
// is not found.
func openStorage(dir string) (storage.Storer, error) {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, err
	}
	return filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), nil
}

// capabilities are what each service offers. Fetch: no multi_ack and no
// side-band, so a response is NAK and the pack; shallow, so that clients
// asking for depth get it.
func capabilities(service string) (*capability.List, error) {
	caps := capability.NewList()
	if err := caps.Set(capability.Agent, "stackpilot-gitserver"); err != nil {
		return nil, err
	}
	set := []capability.Capability{capability.OFSDelta}
	if service == uploadPack {
		set = append(set, capability.Shallow)
	} else {
		set = append(set, capability.ReportStatus, capability.DeleteRefs)
	}
	for _, c := range set {
		if err := caps.Set(c); err != nil {
			return nil, err
		}
	}
	return caps, nil
}

// advertiseRefs writes the ref advertisement of smart HTTP: the service
// line, then every branch and tag (annotated tags peeled, as git does, so
// that clients learn the commit without fetching), and HEAD as a symref.
func advertiseRefs(w io.Writer, st storage.Storer, service string) error {
	ar, err := advertisedRefs(st, service)
	if err != nil {
		return err
	}
	ar.Prefix = [][]byte{[]byte("# service=" + service), pktline.Flush}
	return ar.Encode(w)
}

func advertisedRefs(st storage.Storer, service string) (*packp.AdvRefs, error) {
	ar := packp.NewAdvRefs()
	caps, err := capabilities(service)
	if err != nil {
		return nil, err
	}
	ar.Capabilities = caps
	refs, err := st.IterReferences()
	if err != nil {
		return nil, err
	}
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference || ref.Name() == plumbing.HEAD {
			return nil
		}
		ar.References[ref.Name().String()] = ref.Hash()
		if ref.Name().IsTag() {
			if tag, err := object.GetTag(st, ref.Hash()); err == nil {
				ar.Peeled[ref.Name().String()] = tag.Target
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	head, err := st.Reference(plumbing.HEAD)
	if err != nil {
		return ar, nil // no HEAD to advertise
	}
	if head.Type() == plumbing.SymbolicReference {
		if err := ar.AddReference(head); err != nil {
			return nil, err
		}
		if head, err = storer.ResolveReference(st, head.Target()); err != nil {
			return ar, nil // HEAD names a branch with no commit yet
		}
	}
	h := head.Hash()
	ar.Head = &h
	return ar, nil
}

// servePack answers a fetch: NAK (no common commits are negotiated; the
// haves the server knows are left out of the pack) and a pack of what the
// client wants, cut at the depth it asked for.
func servePack(ctx context.Context, w io.Writer, st storage.Storer, body io.Reader) error {
	req := packp.NewUploadPackRequest()
	if err := req.Decode(body); err != nil {
		return &badRequestError{err}
	}
	if req.IsEmpty() {
		return &badRequestError{fmt.Errorf("no wants")}
	}
	if err := req.Validate(); err != nil {
		return &badRequestError{err}
	}
	// go-git's decoder stops at the flush after the wants: the haves and
	// "done" follow.
	haves, done, err := readHaves(body)
	if err != nil {
		return &badRequestError{err}
	}
	if !done {
		// A stateless client negotiating in rounds: no common commit is
		// ever acknowledged, so it sends "done" in a later request.
		return pktline.NewEncoder(w).EncodeString("NAK\n")
	}
	known := haves[:0]
	for _, h := range haves {
		if st.HasEncodedObject(h) == nil {
			known = append(known, h)
		}
	}
	haves = known
	// A complete clone that has a commit has its whole history, so all of
	// that is left out of the pack; a shallow one may not, so it gets
	// everything it asks for.
	if len(req.Shallows) > 0 {
		haves = nil
	}
	var objs, shallows []plumbing.Hash
	if depth, ok := req.Depth.(packp.DepthCommits); ok && depth > 0 {
		objs, shallows, err = shallowObjects(st, req.Wants, int(depth), haves)
	} else {
		objs, err = fullObjects(st, req.Wants, haves)
	}
	if err != nil {
		return &badRequestError{err}
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := packfile.NewEncoder(pw, st, false).Encode(objs, 10)
		pw.CloseWithError(err)
	}()
	resp := packp.NewUploadPackResponseWithPackfile(req, ioutil.NewContextReadCloser(ctx, pr))
	resp.Shallows = shallows
	return resp.Encode(w)
}

// fullObjects is every object reachable from wants and not from haves.
func fullObjects(st storer.EncodedObjectStorer, wants, haves []plumbing.Hash) ([]plumbing.Hash, error) {
	ignore, err := revlist.Objects(st, haves, nil)
	if err != nil {
		return nil, err
	}
	return revlist.Objects(st, wants, ignore)
}

// readHaves reads the negotiation lines after the wants: "have <id>" lines,
// flushes, and "done" at the end of the last round.
func readHaves(r io.Reader) (haves []plumbing.Hash, done bool, err error) {
	sc := pktline.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSuffix(string(sc.Bytes()), "\n")
		switch {
		case line == "":
			continue // flush
		case line == "done":
			return haves, true, nil
		case strings.HasPrefix(line, "have "):
			h := strings.TrimPrefix(line, "have ")
			if !plumbing.IsHash(h) {
				return nil, false, fmt.Errorf("bad have line %q", line)
			}
			haves = append(haves, plumbing.NewHash(h))
		default:
			return nil, false, fmt.Errorf("unexpected line %q after the wants", line)
		}
	}
	return haves, false, sc.Err()
}
