//go:build !unix

package h1

// alive reports whether an idle connection can carry a request. Without a
// way to peek, one with unread bytes is the only one known to be spent.
func (c *conn) alive() bool { return c.br.Buffered() == 0 }
