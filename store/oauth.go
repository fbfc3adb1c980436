package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// OAuthToken is one principal's tokens for one server, sealed by the caller
// (the store never reads Data). Principal "" is the gateway's own token
// (client_credentials grant).
type OAuthToken struct {
	Server    string
	Principal string
	Data      []byte
	UpdatedAt time.Time // set by Put (the store's clock), returned by Get
}

// OAuthClient is the gateway's client registration at one authorization
// server (by issuer) for one server, sealed by the caller.
type OAuthClient struct {
	Server    string
	Issuer    string
	Data      []byte
	UpdatedAt time.Time // set by Put (the store's clock), returned by Get
}

// Bounds of the OAuth records. Server is a server's name; Principal is
// what auth named the user (a JWT's subject may be long); Issuer is an
// authorization server's URL. Data is sealed by the caller, so the store
// sees only its length: a token response or a client registration is a
// few kB, and a record must not let one principal fill the database.
const (
	// MaxOAuthData bounds the Data of an OAuthToken or an OAuthClient.
	MaxOAuthData = 64 << 10

	maxOAuthServer    = 64
	maxOAuthPrincipal = 4096
	maxOAuthIssuer    = 2048
)

// The checks below name the field but never show its value: a principal
// may be a user's e-mail address, and Data is a credential, sealed or not.
// All three drivers run them, so text that PostgreSQL could not hold (NUL,
// invalid UTF-8) is refused everywhere alike.

func checkOAuthServer(server string) error {
	if server == "" || len(server) > maxOAuthServer || !textOK(server) {
		return fmt.Errorf("the Server must be 1 to %d bytes of UTF-8 without NUL", maxOAuthServer)
	}
	return nil
}

func checkOAuthPrincipal(principal string) error {
	if len(principal) > maxOAuthPrincipal || !textOK(principal) {
		return fmt.Errorf("the Principal must be at most %d bytes of UTF-8 without NUL", maxOAuthPrincipal)
	}
	return nil
}

func checkOAuthIssuer(issuer string) error {
	if issuer == "" || len(issuer) > maxOAuthIssuer || !textOK(issuer) {
		return fmt.Errorf("the Issuer must be 1 to %d bytes of UTF-8 without NUL", maxOAuthIssuer)
	}
	return nil
}

func checkOAuthData(data []byte) error {
	if len(data) == 0 || len(data) > MaxOAuthData {
		return fmt.Errorf("the Data must be 1 to %d bytes, not %d", MaxOAuthData, len(data))
	}
	return nil
}

// checkTokenKey reports what is wrong with a token's server and principal.
func checkTokenKey(server, principal string) error {
	if err := checkOAuthServer(server); err != nil {
		return err
	}
	return checkOAuthPrincipal(principal)
}

// checkClientKey reports what is wrong with a registration's server and
// issuer.
func checkClientKey(server, issuer string) error {
	if err := checkOAuthServer(server); err != nil {
		return err
	}
	return checkOAuthIssuer(issuer)
}

// oauthOp is what an error of op on server's records starts with:
// `getting oauth token for server "a"`. It names the server (a name is not
// secret) only if the name passes its check, so that a refused one, which
// may be long or not text, is not repeated.
func oauthOp(op, server string) string {
	if checkOAuthServer(server) != nil {
		return op
	}
	return fmt.Sprintf("%s for server %q", op, server)
}

// GetOAuthToken returns principal's token for server, or ErrNotFound.
func (s *SQLite) GetOAuthToken(ctx context.Context, server, principal string) (OAuthToken, error) {
	op := oauthOp("getting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	t := OAuthToken{Server: server, Principal: principal}
	var updated string
	err := s.r.QueryRowContext(ctx, `SELECT data, updated_at FROM oauth_tokens WHERE server = ? AND principal = ?`,
		server, principal).Scan(&t.Data, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if err == nil {
		t.UpdatedAt, err = parseUpdatedAt(updated)
	}
	if err != nil {
		return OAuthToken{}, fmt.Errorf("%s: %w", op, err)
	}
	return t, nil
}

// PutOAuthToken stores t, replacing the token of the same server and
// principal. It sets UpdatedAt to now, whatever t holds.
func (s *SQLite) PutOAuthToken(ctx context.Context, t OAuthToken) error {
	op := oauthOp("putting oauth token", t.Server)
	if err := checkOAuthToken(t); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO oauth_tokens (server, principal, data, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (server, principal) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		t.Server, t.Principal, t.Data, formatTime(s.now()))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// checkOAuthToken reports what is wrong with t, field by field.
func checkOAuthToken(t OAuthToken) error {
	if err := checkTokenKey(t.Server, t.Principal); err != nil {
		return err
	}
	return checkOAuthData(t.Data)
}

// DeleteOAuthToken deletes principal's token for server, or returns
// ErrNotFound if there is none.
func (s *SQLite) DeleteOAuthToken(ctx context.Context, server, principal string) error {
	op := oauthOp("deleting oauth token", server)
	if err := checkTokenKey(server, principal); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE server = ? AND principal = ?`, server, principal)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return nil
}

// DeleteOAuthTokens deletes all of server's tokens, the gateway's own
// among them, and returns how many. It is one statement, so all or none
// go: a server has a token per principal, few enough for one transaction.
func (s *SQLite) DeleteOAuthTokens(ctx context.Context, server string) (int, error) {
	op := oauthOp("deleting oauth tokens", server)
	if err := checkOAuthServer(server); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE server = ?`, server)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return int(n), nil
}

// CountOAuthTokens returns how many principals hold a token for server;
// the gateway's own (principal "") is not counted.
func (s *SQLite) CountOAuthTokens(ctx context.Context, server string) (int, error) {
	op := oauthOp("counting oauth tokens", server)
	if err := checkOAuthServer(server); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM oauth_tokens WHERE server = ? AND principal <> ''`,
		server).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// ListOAuthPrincipals returns the principals that hold a token for server,
// in byte order, without the gateway's own ("").
func (s *SQLite) ListOAuthPrincipals(ctx context.Context, server string) ([]string, error) {
	op := oauthOp("listing oauth principals", server)
	if err := checkOAuthServer(server); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := queryAll(ctx, s.r, scanString,
		`SELECT principal FROM oauth_tokens WHERE server = ? AND principal <> '' ORDER BY principal`, server)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

func scanString(row interface{ Scan(...any) error }) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// GetOAuthClient returns the gateway's registration at issuer for server,
// or ErrNotFound.
func (s *SQLite) GetOAuthClient(ctx context.Context, server, issuer string) (OAuthClient, error) {
	op := oauthOp("getting oauth client", server)
	if err := checkClientKey(server, issuer); err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	c := OAuthClient{Server: server, Issuer: issuer}
	var updated string
	err := s.r.QueryRowContext(ctx, `SELECT data, updated_at FROM oauth_clients WHERE server = ? AND issuer = ?`,
		server, issuer).Scan(&c.Data, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if err == nil {
		c.UpdatedAt, err = parseUpdatedAt(updated)
	}
	if err != nil {
		return OAuthClient{}, fmt.Errorf("%s: %w", op, err)
	}
	return c, nil
}

// PutOAuthClient stores c, replacing the registration of the same server
// and issuer. It sets UpdatedAt to now, whatever c holds.
func (s *SQLite) PutOAuthClient(ctx context.Context, c OAuthClient) error {
	op := oauthOp("putting oauth client", c.Server)
	if err := checkOAuthClient(c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO oauth_clients (server, issuer, data, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (server, issuer) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		c.Server, c.Issuer, c.Data, formatTime(s.now()))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// checkOAuthClient reports what is wrong with c, field by field.
func checkOAuthClient(c OAuthClient) error {
	if err := checkClientKey(c.Server, c.Issuer); err != nil {
		return err
	}
	return checkOAuthData(c.Data)
}

// DeleteOAuthClients deletes all of server's registrations. A server with
// none is no error.
func (s *SQLite) DeleteOAuthClients(ctx context.Context, server string) error {
	op := oauthOp("deleting oauth clients", server)
	if err := checkOAuthServer(server); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM oauth_clients WHERE server = ?`, server); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// parseUpdatedAt reads an updated_at column.
func parseUpdatedAt(s string) (time.Time, error) {
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading updated_at: %w", err)
	}
	return t, nil
}
