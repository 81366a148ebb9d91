package opchannel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// shipInterval is how often the engine log and the counts are sent while the
// engine runs: the runner writes its counts at most every second too.
var shipInterval = time.Second

// maxChunksPerShip bounds the requests of one ship: a controller answering
// 409 again and again must not keep the Pod in a loop.
const maxChunksPerShip = 64

// shipper sends the runner's engine log and progress file as they grow.
type shipper struct {
	c            *podClient
	logPath      string
	progressPath string

	offset   int64  // the log bytes the controller has
	logDone  bool   // the controller's bound is reached: no more log
	progress []byte // the progress document the controller has
}

func (s *shipper) loop(ctx context.Context) {
	t := time.NewTicker(shipInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.ship(ctx)
		}
	}
}

// ship sends what is new; nil when the controller has everything.
func (s *shipper) ship(ctx context.Context) error {
	return errors.Join(s.shipLog(ctx), s.shipProgress(ctx))
}

func (s *shipper) shipLog(ctx context.Context) error {
	f, err := os.Open(s.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the engine has not started
	}
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, MaxLogChunkBytes)
	for range maxChunksPerShip {
		if s.logDone {
			return nil
		}
		n, err := f.ReadAt(buf, s.offset)
		if n == 0 {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}
		next, err := s.c.postLog(ctx, s.offset, buf[:n])
		se, isStatus := errors.AsType[*StatusError](err)
		switch {
		case err == nil:
			s.offset = next
		case isStatus && se.Code == http.StatusConflict:
			s.offset = next // the controller's file ends elsewhere: send from there
		case isStatus && se.Code == http.StatusRequestEntityTooLarge:
			s.logDone = true
		default:
			return err
		}
	}
	return nil
}

func (s *shipper) shipProgress(ctx context.Context) error {
	b, err := os.ReadFile(s.progressPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if bytes.Equal(b, s.progress) {
		return nil
	}
	if _, err := s.c.send(ctx, http.MethodPut, "progress", nil, b); err != nil {
		return err
	}
	s.progress = b
	return nil
}
