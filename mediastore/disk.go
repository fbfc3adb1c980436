package mediastore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"
)

// headerVersion is the value of the header's "mcpgw_media" member.
const headerVersion = 1

// maxHeader bounds the first line of a blob file.
const maxHeader = 8 << 10

// header is the first line of a blob file, as JSON; the blob's bytes
// follow the newline that ends it.
type header struct {
	Version  int       `json:"mcpgw_media"`
	MIMEType string    `json:"mimeType"`
	Owner    string    `json:"owner"`
	Stored   time.Time `json:"stored"`
	Size     int64     `json:"size"`
}

func encodeHeader(e Entry) ([]byte, error) {
	b, err := json.Marshal(header{
		Version:  headerVersion,
		MIMEType: e.MIMEType,
		Owner:    e.Owner,
		Stored:   e.Stored.UTC(),
		Size:     e.Size,
	})
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if len(b) > maxHeader {
		return nil, errors.New("mediastore: header too long")
	}
	return b, nil
}

// load indexes the blobs in the directory, oldest first so that the LRU
// order follows age, and removes everything that is not a valid,
// unexpired blob. Subdirectories are left alone: they are not ours.
func (s *Store) load() error {
	d, err := s.root.Open(".")
	if err != nil {
		return err
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	now := s.now()
	var kept []entry
	removed := 0
	for _, de := range des {
		name := de.Name()
		if de.IsDir() {
			s.logger.Debug("media directory has a subdirectory; leaving it", "name", name)
			continue
		}
		e, why := s.check(de, now)
		if why != "" {
			if why == "expired" {
				s.stats.Expirations++
			}
			if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.logger.Warn("removing media file failed", "name", name, "err", err)
				continue
			}
			s.logger.Debug("media file removed", "name", name, "reason", why)
			removed++
			continue
		}
		kept = append(kept, e)
	}
	sort.Slice(kept, func(i, j int) bool {
		if !kept[i].Stored.Equal(kept[j].Stored) {
			return kept[i].Stored.Before(kept[j].Stored)
		}
		return kept[i].Name() < kept[j].Name()
	})
	for _, e := range kept {
		// One id under two extensions (a crash while one MIME type
		// replaced another): the later one wins, and dropped removes
		// the earlier one's file.
		if s.index.Remove(e.ID) {
			removed++
		}
		if s.index.Add(e.ID, e) {
			s.stats.Evictions++
		}
		s.bytes += e.Size
	}
	s.trimLocked()
	s.logger.Info("media store indexed", "files", s.index.Len(), "bytes", s.bytes, "removed", removed)
	return nil
}

// check reads the file of de back and returns its entry, or why it is
// not a valid, unexpired blob.
func (s *Store) check(de fs.DirEntry, now time.Time) (entry, string) {
	name := de.Name()
	if strings.HasPrefix(name, tmpPrefix) {
		return entry{}, "temporary file"
	}
	id, ext, err := ParseName(name)
	if err != nil {
		return entry{}, "not a media file name"
	}
	if !de.Type().IsRegular() {
		return entry{}, "not a regular file"
	}
	f, err := s.root.OpenFile(name, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return entry{}, "unreadable"
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return entry{}, "not a regular file"
	}
	first := make([]byte, min(fi.Size(), maxHeader))
	if _, err := io.ReadFull(f, first); err != nil {
		return entry{}, "unreadable"
	}
	nl := bytes.IndexByte(first, '\n')
	if nl < 0 {
		return entry{}, "no header"
	}
	var h header
	dec := json.NewDecoder(bytes.NewReader(first[:nl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || h.Version != headerVersion || dec.More() {
		return entry{}, "bad header"
	}
	off := int64(nl + 1)
	switch {
	case h.Size < 0 || fi.Size() != off+h.Size:
		return entry{}, "truncated or overlong"
	case cleanMIME(h.MIMEType) != h.MIMEType || ExtFor(h.MIMEType) != ext:
		return entry{}, "MIME type does not match the name"
	}
	stored := h.Stored
	if mt := fi.ModTime(); mt.After(stored) && !mt.After(now) {
		stored = mt // refreshed by a later Put (touch)
	}
	e := entry{Entry: Entry{ID: id, Ext: ext, MIMEType: h.MIMEType, Size: h.Size, Owner: h.Owner, Stored: stored}, off: off}
	if s.expired(e, now) {
		return entry{}, "expired"
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, off, h.Size)); err != nil {
		return entry{}, "unreadable"
	}
	if !hmac.Equal([]byte(idFromDigest(s.idKey, h.Owner, sum.Sum(nil))), []byte(id)) {
		return entry{}, "content does not match its id"
	}
	return e, ""
}
