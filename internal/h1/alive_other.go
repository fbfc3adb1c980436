//go:build !unix

package h1

// peeker has nothing to hold where alive cannot peek.
type peeker struct{}

// alive reports whether an idle connection can carry a request. Without a
// way to peek, it is taken to be; a request that finds it closed is sent
// again when it may be (see Transport.RoundTrip).
func (c *conn) alive() bool { return true }
