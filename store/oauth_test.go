package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgw/mcpgw/internal/pgtest"
)

// oauthStore is the OAuth half of the contract (contract_test.go).
type oauthStore interface {
	GetOAuthToken(ctx context.Context, server, principal string) (OAuthToken, error)
	PutOAuthToken(context.Context, OAuthToken) error
	DeleteOAuthToken(ctx context.Context, server, principal string) error
	DeleteOAuthTokens(ctx context.Context, server string) (int, error)
	CountOAuthTokens(ctx context.Context, server string) (int, error)
	ListOAuthPrincipals(ctx context.Context, server string) ([]string, error)
	GetOAuthClient(ctx context.Context, server, issuer string) (OAuthClient, error)
	PutOAuthClient(context.Context, OAuthClient) error
	DeleteOAuthClients(ctx context.Context, server string) error
}

// tok is a token of principal at server holding data; a put ignores its
// UpdatedAt.
func tok(server, principal, data string) OAuthToken {
	return OAuthToken{Server: server, Principal: principal, Data: []byte(data)}
}

// client is the registration at issuer for server, holding data.
func client(server, issuer, data string) OAuthClient {
	return OAuthClient{Server: server, Issuer: issuer, Data: []byte(data)}
}

// cet is a zone other than UTC: the stores' clocks read in it, and what
// they return must be in UTC all the same.
var cet = time.FixedZone("CET", 3600)

// oauthServers are the servers every TestOAuthTokens case looks at.
var oauthServers = []string{"a", "b", "c"}

// TestOAuthTokens runs each case's steps in order on a new store, step i
// at time at(i), then checks every server's principals and count, each
// token wanted, and that each key of gone has none.
func TestOAuthTokens(t *testing.T) {
	type key struct{ server, principal string }
	type step struct {
		put     *OAuthToken // PutOAuthToken(*put)
		del     *key        // DeleteOAuthToken
		delAll  string      // DeleteOAuthTokens, returning wantN
		wantN   int
		wantErr error // matched with errors.Is
	}
	// stored is t as Get returns it after a put at step i.
	stored := func(t OAuthToken, i int) OAuthToken {
		t.UpdatedAt = at(i)
		return t
	}
	long := strings.Repeat("p", maxOAuthPrincipal)
	server64 := strings.Repeat("s", maxOAuthServer)
	binary := string([]byte{0, 0xff, 0xfe, '\n', 0, 'x'})
	big := strings.Repeat("d", MaxOAuthData)
	tests := []struct {
		name  string
		steps []step
		want  []OAuthToken // what Get returns for each key, and all there is
		gone  []key        // keys Get finds nothing for
	}{
		{
			name: "empty",
			gone: []key{{"a", ""}, {"a", "alice"}},
		},
		{
			name:  "put and get",
			steps: []step{{put: ptr(tok("a", "alice", "sealed-1"))}},
			want:  []OAuthToken{stored(tok("a", "alice", "sealed-1"), 0)},
			gone:  []key{{"a", ""}, {"a", "bob"}, {"b", "alice"}},
		},
		{
			name: "a put replaces data and time, whatever UpdatedAt says",
			steps: []step{
				{put: ptr(tok("a", "alice", "sealed-1"))},
				{put: func() *OAuthToken {
					t := tok("a", "alice", "sealed-2")
					t.UpdatedAt = base.Add(-24 * time.Hour)
					return &t
				}()},
			},
			want: []OAuthToken{stored(tok("a", "alice", "sealed-2"), 1)},
		},
		{
			name: "the gateway's own token is kept but neither counted nor listed",
			steps: []step{
				{put: ptr(tok("a", "", "own"))},
				{put: ptr(tok("a", "alice", "sealed-a"))},
			},
			want: []OAuthToken{stored(tok("a", "", "own"), 0), stored(tok("a", "alice", "sealed-a"), 1)},
		},
		{
			name:  "only the gateway's own",
			steps: []step{{put: ptr(tok("b", "", "own"))}},
			want:  []OAuthToken{stored(tok("b", "", "own"), 0)},
			gone:  []key{{"a", ""}, {"c", ""}},
		},
		{
			name: "servers are apart",
			steps: []step{
				{put: ptr(tok("a", "alice", "at-a"))},
				{put: ptr(tok("b", "alice", "at-b"))},
				{put: ptr(tok("b", "", "own-b"))},
			},
			want: []OAuthToken{
				stored(tok("a", "alice", "at-a"), 0),
				stored(tok("b", "", "own-b"), 2),
				stored(tok("b", "alice", "at-b"), 1),
			},
			gone: []key{{"a", ""}, {"c", "alice"}},
		},
		{
			name: "delete one",
			steps: []step{
				{put: ptr(tok("a", "alice", "x"))},
				{put: ptr(tok("a", "bob", "y"))},
				{put: ptr(tok("b", "alice", "z"))},
				{del: &key{"a", "alice"}},
				{del: &key{"a", "alice"}, wantErr: ErrNotFound},
				{del: &key{"a", ""}, wantErr: ErrNotFound},
				{del: &key{"c", "bob"}, wantErr: ErrNotFound},
			},
			want: []OAuthToken{stored(tok("a", "bob", "y"), 1), stored(tok("b", "alice", "z"), 2)},
			gone: []key{{"a", "alice"}},
		},
		{
			name: "delete the gateway's own",
			steps: []step{
				{put: ptr(tok("a", "", "own"))},
				{del: &key{"a", ""}},
			},
			gone: []key{{"a", ""}},
		},
		{
			name: "delete all of a server's, the gateway's own among them",
			steps: []step{
				{put: ptr(tok("a", "alice", "1"))},
				{put: ptr(tok("a", "bob", "2"))},
				{put: ptr(tok("a", "", "3"))},
				{put: ptr(tok("b", "alice", "4"))},
				{put: ptr(tok("b", "", "5"))},
				{delAll: "a", wantN: 3},
				{delAll: "a", wantN: 0},
				{delAll: "c", wantN: 0},
			},
			want: []OAuthToken{stored(tok("b", "", "5"), 4), stored(tok("b", "alice", "4"), 3)},
			gone: []key{{"a", "alice"}, {"a", "bob"}, {"a", ""}},
		},
		{
			name: "put again after a delete",
			steps: []step{
				{put: ptr(tok("a", "alice", "1"))},
				{delAll: "a", wantN: 1},
				{put: ptr(tok("a", "alice", "2"))},
			},
			want: []OAuthToken{stored(tok("a", "alice", "2"), 2)},
		},
		{
			name: "keys are exact",
			steps: []step{
				{put: ptr(tok("a", "alice", "1"))},
				{put: ptr(tok("a", "Alice", "2"))},
				{put: ptr(tok("a", "alice ", "3"))},
				{del: &key{"a", "ALICE"}, wantErr: ErrNotFound},
			},
			want: []OAuthToken{
				stored(tok("a", "Alice", "2"), 1),
				stored(tok("a", "alice", "1"), 0),
				stored(tok("a", "alice ", "3"), 2),
			},
			gone: []key{{"a", "ALICE"}, {"a", " alice"}, {"A", "alice"}},
		},
		{
			name: "principals in byte order",
			steps: []step{
				{put: ptr(tok("a", "bob", "1"))},
				{put: ptr(tok("a", "é", "2"))},
				{put: ptr(tok("a", "alice@example.com", "3"))},
				{put: ptr(tok("a", "Zed", "4"))},
				{put: ptr(tok("a", "alice", "5"))},
				{put: ptr(tok("a", "a b", "6"))},
			},
			want: []OAuthToken{
				stored(tok("a", "Zed", "4"), 3),
				stored(tok("a", "a b", "6"), 5),
				stored(tok("a", "alice", "5"), 4),
				stored(tok("a", "alice@example.com", "3"), 2),
				stored(tok("a", "bob", "1"), 0),
				stored(tok("a", "é", "2"), 1),
			},
		},
		{
			name:  "data is kept byte for byte",
			steps: []step{{put: ptr(tok("a", "alice", binary))}},
			want:  []OAuthToken{stored(tok("a", "alice", binary), 0)},
		},
		{
			name: "every field at its bound",
			steps: []step{
				{put: ptr(tok(server64, long, big))},
				{put: ptr(tok("a", "x", "1"))},
			},
			want: []OAuthToken{stored(tok("a", "x", "1"), 1), stored(tok(server64, long, big), 0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			forEachStore(t, func() time.Time { return now }, func(t *testing.T, s contractStore) {
				ctx := t.Context()
				for i, st := range tt.steps {
					now = at(i).In(cet)
					switch {
					case st.put != nil:
						if err := s.PutOAuthToken(ctx, *st.put); !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: PutOAuthToken = %v, want %v", i, err, st.wantErr)
						}
					case st.del != nil:
						if err := s.DeleteOAuthToken(ctx, st.del.server, st.del.principal); !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: DeleteOAuthToken(%q, %q) = %v, want %v", i, st.del.server, st.del.principal, err, st.wantErr)
						}
					default:
						n, err := s.DeleteOAuthTokens(ctx, st.delAll)
						if !errors.Is(err, st.wantErr) || n != st.wantN {
							t.Fatalf("step %d: DeleteOAuthTokens(%q) = %d, %v; want %d, %v", i, st.delAll, n, err, st.wantN, st.wantErr)
						}
					}
				}
				for _, server := range append(slices.Clone(oauthServers), strings.Repeat("s", maxOAuthServer)) {
					var want []string
					for _, w := range tt.want {
						if w.Server == server && w.Principal != "" {
							want = append(want, w.Principal)
						}
					}
					got, err := s.ListOAuthPrincipals(ctx, server)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("ListOAuthPrincipals(%q) (-want +got):\n%s", server, diff)
					}
					if n, err := s.CountOAuthTokens(ctx, server); err != nil || n != len(want) {
						t.Errorf("CountOAuthTokens(%q) = %d, %v; want %d", server, n, err, len(want))
					}
				}
				for _, want := range tt.want {
					got, err := s.GetOAuthToken(ctx, want.Server, want.Principal)
					if err != nil {
						t.Errorf("GetOAuthToken(%q, %.20q): %v", want.Server, want.Principal, err)
						continue
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("GetOAuthToken(%q, %.20q) (-want +got):\n%s", want.Server, want.Principal, diff)
					}
					if got.UpdatedAt.Location() != time.UTC {
						t.Errorf("GetOAuthToken(%q, %.20q): UpdatedAt %v is in %v, want UTC", want.Server, want.Principal, got.UpdatedAt, got.UpdatedAt.Location())
					}
				}
				for _, k := range tt.gone {
					got, err := s.GetOAuthToken(ctx, k.server, k.principal)
					if !errors.Is(err, ErrNotFound) {
						t.Errorf("GetOAuthToken(%q, %q) = %v, want ErrNotFound", k.server, k.principal, err)
						continue
					}
					if want := fmt.Sprintf("getting oauth token for server %q: not found", k.server); err.Error() != want {
						t.Errorf("GetOAuthToken(%q, %q) error %q, want %q", k.server, k.principal, err, want)
					}
					if !cmp.Equal(OAuthToken{}, got) {
						t.Errorf("GetOAuthToken(%q, %q) returned %+v with its error", k.server, k.principal, got)
					}
				}
			})
		})
	}
}

// TestOAuthClients: a registration is kept per server and issuer, a put
// replaces it, and DeleteOAuthClients takes one server's only.
func TestOAuthClients(t *testing.T) {
	const (
		as1 = "https://as.example.com"
		as2 = "https://as.example.com/tenant"
	)
	var now time.Time
	forEachStore(t, func() time.Time { return now }, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		puts := []OAuthClient{
			client("a", as1, "reg-a-1"),
			client("a", as2, "reg-a-2"),
			client("b", as1, "reg-b-1"),
			client("a", as1, "reg-a-1 again"), // replaces the first
		}
		for i, c := range puts {
			now = at(i).In(cet)
			c.UpdatedAt = base.Add(-time.Hour) // ignored
			if err := s.PutOAuthClient(ctx, c); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		stored := func(c OAuthClient, i int) OAuthClient {
			c.UpdatedAt = at(i)
			return c
		}
		check := func(when string, want []OAuthClient, gone [][2]string) {
			t.Helper()
			for _, w := range want {
				got, err := s.GetOAuthClient(ctx, w.Server, w.Issuer)
				if err != nil {
					t.Errorf("%s: GetOAuthClient(%q, %q): %v", when, w.Server, w.Issuer, err)
					continue
				}
				if diff := cmp.Diff(w, got); diff != "" {
					t.Errorf("%s: GetOAuthClient(%q, %q) (-want +got):\n%s", when, w.Server, w.Issuer, diff)
				}
				if got.UpdatedAt.Location() != time.UTC {
					t.Errorf("%s: UpdatedAt %v is in %v, want UTC", when, got.UpdatedAt, got.UpdatedAt.Location())
				}
			}
			for _, k := range gone {
				got, err := s.GetOAuthClient(ctx, k[0], k[1])
				if !errors.Is(err, ErrNotFound) || !cmp.Equal(OAuthClient{}, got) {
					t.Errorf("%s: GetOAuthClient(%q, %q) = %+v, %v; want ErrNotFound", when, k[0], k[1], got, err)
					continue
				}
				if want := fmt.Sprintf("getting oauth client for server %q: not found", k[0]); err.Error() != want {
					t.Errorf("%s: GetOAuthClient(%q, %q) error %q, want %q", when, k[0], k[1], err, want)
				}
			}
		}
		check("after the puts",
			[]OAuthClient{stored(puts[3], 3), stored(puts[1], 1), stored(puts[2], 2)},
			[][2]string{{"b", as2}, {"c", as1}, {"a", as1 + "/"}, {"a", "https://AS.example.com"}})

		if err := s.DeleteOAuthClients(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOAuthClients(ctx, "a"); err != nil {
			t.Errorf("DeleteOAuthClients of a server without any: %v", err)
		}
		if err := s.DeleteOAuthClients(ctx, "c"); err != nil {
			t.Errorf("DeleteOAuthClients of an unknown server: %v", err)
		}
		check("after deleting a's", []OAuthClient{stored(puts[2], 2)}, [][2]string{{"a", as1}, {"a", as2}})

		// Tokens and registrations are apart: deleting one kind leaves the
		// other.
		if err := s.PutOAuthToken(ctx, tok("b", "alice", "t")); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOAuthClients(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetOAuthToken(ctx, "b", "alice"); err != nil {
			t.Errorf("DeleteOAuthClients took the server's token: %v", err)
		}
		if err := s.PutOAuthClient(ctx, client("b", as1, "r")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteOAuthTokens(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetOAuthClient(ctx, "b", as1); err != nil {
			t.Errorf("DeleteOAuthTokens took the server's registration: %v", err)
		}
	})
}

// TestOAuth_NoForeignKey: the records are not the servers table's: they
// are kept for a server with no row (one of the config file), and deleting
// a server's row leaves them.
func TestOAuth_NoForeignKey(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		if _, err := s.PutServer(ctx, apiServer("a", `{}`)); err != nil {
			t.Fatal(err)
		}
		for _, server := range []string{"a", "from-config"} {
			if err := s.PutOAuthToken(ctx, tok(server, "alice", "t")); err != nil {
				t.Fatal(err)
			}
			if err := s.PutOAuthClient(ctx, client(server, "https://as.example.com", "r")); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteServer(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		for _, server := range []string{"a", "from-config"} {
			if _, err := s.GetOAuthToken(ctx, server, "alice"); err != nil {
				t.Errorf("GetOAuthToken(%q): %v", server, err)
			}
			if _, err := s.GetOAuthClient(ctx, server, "https://as.example.com"); err != nil {
				t.Errorf("GetOAuthClient(%q): %v", server, err)
			}
		}
	})
}

// TestOAuth_OwnCopy: a store shares no memory with its callers.
func TestOAuth_OwnCopy(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		tk, c := tok("a", "alice", "sealed"), client("a", "https://as.example.com", "sealed")
		if err := s.PutOAuthToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if err := s.PutOAuthClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		tk.Data[0], c.Data[0] = 'X', 'X'
		for range 2 {
			gt, err := s.GetOAuthToken(ctx, "a", "alice")
			if err != nil {
				t.Fatal(err)
			}
			gc, err := s.GetOAuthClient(ctx, "a", "https://as.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if string(gt.Data) != "sealed" || string(gc.Data) != "sealed" {
				t.Fatalf("got token %q, client %q; want both \"sealed\"", gt.Data, gc.Data)
			}
			gt.Data[0], gc.Data[0] = 'Y', 'Y'
		}
	})
}

// TestOAuth_Invalid: every bad argument of every method is refused with
// an error naming the field, never showing a principal or data, and
// changes nothing stored.
func TestOAuth_Invalid(t *testing.T) {
	const secret = "hunter2-sealed"
	var (
		longServer    = strings.Repeat("s", maxOAuthServer+1)
		longPrincipal = secret + strings.Repeat("p", maxOAuthPrincipal+1-len(secret))
		longIssuer    = "https://as.example.com/" + strings.Repeat("i", maxOAuthIssuer+1-len("https://as.example.com/"))
		bigData       = bytes.Repeat([]byte(secret), MaxOAuthData/len(secret)+1)
	)
	const (
		badServer    = "the Server must be 1 to 64 bytes of UTF-8 without NUL"
		badPrincipal = "the Principal must be at most 4096 bytes of UTF-8 without NUL"
		badIssuer    = "the Issuer must be 1 to 2048 bytes of UTF-8 without NUL"
	)
	const as = "https://as.example.com"
	tests := []struct {
		name string
		call func(context.Context, oauthStore) error
		want string
	}{
		// PutOAuthToken: each field.
		{"put token, no server", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("", "alice", secret))
		}, "putting oauth token: " + badServer},
		{"put token, server too long", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok(longServer, "alice", secret))
		}, "putting oauth token: " + badServer},
		{"put token, server with NUL", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a\x00", "alice", secret))
		}, "putting oauth token: " + badServer},
		{"put token, server not UTF-8", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a\xff", "alice", secret))
		}, "putting oauth token: " + badServer},
		{"put token, principal too long", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a", longPrincipal, secret))
		}, `putting oauth token for server "a": ` + badPrincipal},
		{"put token, principal with NUL", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a", secret+"\x00", secret))
		}, `putting oauth token for server "a": ` + badPrincipal},
		{"put token, principal not UTF-8", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a", secret+"\xe9", secret))
		}, `putting oauth token for server "a": ` + badPrincipal},
		{"put token, no data", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, tok("a", "alice", ""))
		}, `putting oauth token for server "a": the Data must be 1 to 65536 bytes, not 0`},
		{"put token, data too large", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthToken(ctx, OAuthToken{Server: "a", Principal: "alice", Data: bigData})
		}, fmt.Sprintf(`putting oauth token for server "a": the Data must be 1 to 65536 bytes, not %d`, len(bigData))},
		// The other token methods: their arguments.
		{"get token, no server", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthToken(ctx, "", "alice")
			return err
		}, "getting oauth token: " + badServer},
		{"get token, principal too long", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthToken(ctx, "a", longPrincipal)
			return err
		}, `getting oauth token for server "a": ` + badPrincipal},
		{"get token, principal not UTF-8", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthToken(ctx, "a", secret+"\xe9")
			return err
		}, `getting oauth token for server "a": ` + badPrincipal},
		{"delete token, server too long", func(ctx context.Context, s oauthStore) error {
			return s.DeleteOAuthToken(ctx, longServer, "alice")
		}, "deleting oauth token: " + badServer},
		{"delete token, principal with NUL", func(ctx context.Context, s oauthStore) error {
			return s.DeleteOAuthToken(ctx, "a", secret+"\x00")
		}, `deleting oauth token for server "a": ` + badPrincipal},
		{"delete tokens, no server", func(ctx context.Context, s oauthStore) error {
			_, err := s.DeleteOAuthTokens(ctx, "")
			return err
		}, "deleting oauth tokens: " + badServer},
		{"count tokens, server with NUL", func(ctx context.Context, s oauthStore) error {
			_, err := s.CountOAuthTokens(ctx, "a\x00")
			return err
		}, "counting oauth tokens: " + badServer},
		{"list principals, server not UTF-8", func(ctx context.Context, s oauthStore) error {
			_, err := s.ListOAuthPrincipals(ctx, "\xff")
			return err
		}, "listing oauth principals: " + badServer},
		// PutOAuthClient: each field.
		{"put client, no server", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client("", as, secret))
		}, "putting oauth client: " + badServer},
		{"put client, server too long", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client(longServer, as, secret))
		}, "putting oauth client: " + badServer},
		{"put client, no issuer", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client("a", "", secret))
		}, `putting oauth client for server "a": ` + badIssuer},
		{"put client, issuer too long", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client("a", longIssuer, secret))
		}, `putting oauth client for server "a": ` + badIssuer},
		{"put client, issuer with NUL", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client("a", as+"\x00", secret))
		}, `putting oauth client for server "a": ` + badIssuer},
		{"put client, issuer not UTF-8", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, client("a", as+"\xe9", secret))
		}, `putting oauth client for server "a": ` + badIssuer},
		{"put client, no data", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, OAuthClient{Server: "a", Issuer: as})
		}, `putting oauth client for server "a": the Data must be 1 to 65536 bytes, not 0`},
		{"put client, data too large", func(ctx context.Context, s oauthStore) error {
			return s.PutOAuthClient(ctx, OAuthClient{Server: "a", Issuer: as, Data: bigData})
		}, fmt.Sprintf(`putting oauth client for server "a": the Data must be 1 to 65536 bytes, not %d`, len(bigData))},
		// The other client methods.
		{"get client, no server", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthClient(ctx, "", as)
			return err
		}, "getting oauth client: " + badServer},
		{"get client, no issuer", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthClient(ctx, "a", "")
			return err
		}, `getting oauth client for server "a": ` + badIssuer},
		{"get client, issuer too long", func(ctx context.Context, s oauthStore) error {
			_, err := s.GetOAuthClient(ctx, "a", longIssuer)
			return err
		}, `getting oauth client for server "a": ` + badIssuer},
		{"delete clients, server too long", func(ctx context.Context, s oauthStore) error {
			return s.DeleteOAuthClients(ctx, longServer)
		}, "deleting oauth clients: " + badServer},
	}
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		// What is stored before must be all there is after.
		if err := s.PutOAuthToken(ctx, tok("a", "alice", "kept")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutOAuthClient(ctx, client("a", as, "kept")); err != nil {
			t.Fatal(err)
		}
		beforeT, err := s.GetOAuthToken(ctx, "a", "alice")
		if err != nil {
			t.Fatal(err)
		}
		beforeC, err := s.GetOAuthClient(ctx, "a", as)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call(ctx, s)
				if err == nil {
					t.Fatal("the call succeeded")
				}
				if err.Error() != tt.want {
					t.Errorf("error %q,\nwant %q", err, tt.want)
				}
				if errors.Is(err, ErrNotFound) {
					t.Errorf("error %q is ErrNotFound; a bad argument is not a missing record", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a principal or data", err)
				}
			})
		}
		if got, err := s.GetOAuthToken(ctx, "a", "alice"); err != nil || !cmp.Equal(beforeT, got) {
			t.Errorf("after the refusals, GetOAuthToken = %+v, %v; want %+v", got, err, beforeT)
		}
		if got, err := s.GetOAuthClient(ctx, "a", as); err != nil || !cmp.Equal(beforeC, got) {
			t.Errorf("after the refusals, GetOAuthClient = %+v, %v; want %+v", got, err, beforeC)
		}
		if got, err := s.ListOAuthPrincipals(ctx, "a"); err != nil || !cmp.Equal([]string{"alice"}, got) {
			t.Errorf("after the refusals, ListOAuthPrincipals = %q, %v; want [alice]", got, err)
		}
	})
}

func TestOAuth_ContextCancelled(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		if err := s.PutOAuthToken(t.Context(), tok("a", "alice", "kept")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := map[string]func() error{
			"PutOAuthToken":    func() error { return s.PutOAuthToken(ctx, tok("a", "bob", "x")) },
			"GetOAuthToken":    func() error { _, err := s.GetOAuthToken(ctx, "a", "alice"); return err },
			"DeleteOAuthToken": func() error { return s.DeleteOAuthToken(ctx, "a", "alice") },
			"DeleteOAuthTokens": func() error {
				_, err := s.DeleteOAuthTokens(ctx, "a")
				return err
			},
			"CountOAuthTokens": func() error { _, err := s.CountOAuthTokens(ctx, "a"); return err },
			"ListOAuthPrincipals": func() error {
				_, err := s.ListOAuthPrincipals(ctx, "a")
				return err
			},
			"PutOAuthClient": func() error { return s.PutOAuthClient(ctx, client("a", "https://as.example.com", "x")) },
			"GetOAuthClient": func() error {
				_, err := s.GetOAuthClient(ctx, "a", "https://as.example.com")
				return err
			},
			"DeleteOAuthClients": func() error { return s.DeleteOAuthClients(ctx, "a") },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s = %v, want context.Canceled", name, err)
			}
		}
		if got, err := s.ListOAuthPrincipals(t.Context(), "a"); err != nil || !cmp.Equal([]string{"alice"}, got) {
			t.Errorf("after cancelled calls, ListOAuthPrincipals = %q, %v; want [alice]", got, err)
		}
		if _, err := s.GetOAuthClient(t.Context(), "a", "https://as.example.com"); !errors.Is(err, ErrNotFound) {
			t.Errorf("after a cancelled put, GetOAuthClient = %v, want ErrNotFound", err)
		}
	})
}

// TestOAuth_Concurrent has goroutines put, read and list one key at once;
// run it with -race. Every read sees a value some put wrote, whole, and
// the last is some goroutine's last: each goroutine's puts follow one
// another, so whichever put lands last is the last of its goroutine.
// Beside it each goroutine puts a principal of its own, and all of those
// are counted.
func TestOAuth_Concurrent(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		const goroutines, rounds = 16, 5
		value := func(g, r int) string { return fmt.Sprintf("sealed-%02d-%d-%s", g, r, strings.Repeat("x", 100*g)) }
		written, last := map[string]bool{}, map[string]bool{}
		for g := range goroutines {
			for r := range rounds {
				written[value(g, r)] = true
			}
			last[value(g, rounds-1)] = true
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2*goroutines)
		for g := range goroutines {
			wg.Go(func() {
				if err := s.PutOAuthToken(ctx, tok("a", fmt.Sprintf("p%02d", g), "own")); err != nil {
					errs <- err
					return
				}
				for r := range rounds {
					if err := s.PutOAuthToken(ctx, tok("a", "shared", value(g, r))); err != nil {
						errs <- err
						return
					}
					if err := s.PutOAuthClient(ctx, client("a", "https://as.example.com", value(g, r))); err != nil {
						errs <- err
						return
					}
					got, err := s.GetOAuthToken(ctx, "a", "shared")
					if err != nil {
						errs <- err
						return
					}
					if !written[string(got.Data)] {
						errs <- fmt.Errorf("goroutine %d round %d: read a token no put wrote (%d bytes)", g, r, len(got.Data))
						return
					}
					gc, err := s.GetOAuthClient(ctx, "a", "https://as.example.com")
					if err != nil {
						errs <- err
						return
					}
					if !written[string(gc.Data)] {
						errs <- fmt.Errorf("goroutine %d round %d: read a registration no put wrote (%d bytes)", g, r, len(gc.Data))
						return
					}
					if _, err := s.ListOAuthPrincipals(ctx, "a"); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got, err := s.GetOAuthToken(ctx, "a", "shared")
		if err != nil {
			t.Fatal(err)
		}
		if !last[string(got.Data)] {
			t.Errorf("the token ended as %.20q..., not the last put of any goroutine", got.Data)
		}
		gc, err := s.GetOAuthClient(ctx, "a", "https://as.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if !last[string(gc.Data)] {
			t.Errorf("the registration ended as %.20q..., not the last put of any goroutine", gc.Data)
		}
		if n, err := s.CountOAuthTokens(ctx, "a"); err != nil || n != goroutines+1 {
			t.Errorf("CountOAuthTokens = %d, %v; want %d", n, err, goroutines+1)
		}
	})
}

// fromVersion6 opens a database at migration 6 (before oauth) through
// open, puts a task and a server, then opens it with every migration
// twice: the first open migrates and puts OAuth records, the second finds
// them and what was there before.
func fromVersion6(t *testing.T, open func(ms int) (s contractStore, applied func() []string, close func())) {
	ctx := t.Context()
	old, _, closeOld := open(6)
	if err := old.PutTask(ctx, task("t1", "principal:alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.PutServer(ctx, apiServer("github", `{"url":"https://example.com"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.GetOAuthToken(ctx, "github", "alice"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("the old database: GetOAuthToken = %v, want a missing table", err)
	}
	closeOld()

	wantT := tok("github", "alice", "sealed")
	wantC := client("github", "https://as.example.com", "registration")
	for i := range 2 { // migrating, then reopening
		s, applied, closeNew := open(len(migrations))
		if diff := cmp.Diff(shipped, applied()); diff != "" {
			t.Errorf("open %d: versions (-want +got):\n%s", i, diff)
		}
		if got, err := s.GetTask(ctx, "t1"); err != nil || !cmp.Equal(task("t1", "principal:alice"), got) {
			t.Errorf("open %d: GetTask = %+v, %v; want the task put before migrating", i, got, err)
		}
		if got, err := s.GetServer(ctx, "github"); err != nil || string(got.Entry) != `{"url":"https://example.com"}` {
			t.Errorf("open %d: GetServer = %+v, %v; want the server put before migrating", i, got, err)
		}
		if i == 0 {
			setClock(s, func() time.Time { return base })
			if err := s.PutOAuthToken(ctx, wantT); err != nil {
				t.Fatal(err)
			}
			if err := s.PutOAuthClient(ctx, wantC); err != nil {
				t.Fatal(err)
			}
			wantT.UpdatedAt, wantC.UpdatedAt = base, base
		} else {
			if got, err := s.GetOAuthToken(ctx, "github", "alice"); err != nil || !cmp.Equal(wantT, got) {
				t.Errorf("open %d: GetOAuthToken = %+v, %v; want %+v", i, got, err, wantT)
			}
			if got, err := s.GetOAuthClient(ctx, "github", "https://as.example.com"); err != nil || !cmp.Equal(wantC, got) {
				t.Errorf("open %d: GetOAuthClient = %+v, %v; want %+v", i, got, err, wantC)
			}
		}
		closeNew()
	}
}

func TestMigrate_FromVersion6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpgw.db")
	fromVersion6(t, func(n int) (contractStore, func() []string, func()) {
		s, err := open(t.Context(), path, migrations[:n])
		if err != nil {
			t.Fatal(err)
		}
		return s, func() []string { return appliedVersions(t, s.w) }, func() {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestMigratePostgres_FromVersion6(t *testing.T) {
	dsn := pgtest.DSN(t)
	fromVersion6(t, func(n int) (contractStore, func() []string, func()) {
		s := openPostgresAt(t, dsn, pgMigrations[:n])
		return s, func() []string { return pgApplied(t, s.pool) }, func() { s.Close() }
	})
}

// oauthErr matches every error a put of a token may return for a bad
// argument: the operation, the server when it is valid, and the field.
var oauthErr = regexp.MustCompile(`^putting oauth token(?: for server "(?:[^"\\]|\\.)*")?: (?:the Server must be 1 to 64 bytes of UTF-8 without NUL|the Principal must be at most 4096 bytes of UTF-8 without NUL|the Data must be 1 to 65536 bytes, not [0-9]+)$`)

// FuzzOAuthToken puts whatever the fuzzer gives on Memory and SQLite: both
// agree, a refusal is one of the known errors (so it shows no principal
// and no data), and what is stored reads back the same and is listed when
// its principal is not "".
func FuzzOAuthToken(f *testing.F) {
	f.Add("a", "alice", []byte("sealed"))
	f.Add("a", "", []byte{0})
	f.Add("", "alice", []byte("x"))
	f.Add("a\x00", "alice", []byte("x"))
	f.Add("a", "al\x00ice", []byte("x"))
	f.Add("a", "caf\xe9", []byte("x"))
	f.Add("é", "é", []byte{})
	f.Add(strings.Repeat("s", 65), "alice", []byte("x"))
	mem, sq := NewMemory(), openTest(f)
	f.Fuzz(func(t *testing.T, server, principal string, data []byte) {
		ctx := context.Background()
		var errs [2]error
		for i, s := range []oauthStore{mem, sq} {
			errs[i] = s.PutOAuthToken(ctx, OAuthToken{Server: server, Principal: principal, Data: data})
		}
		if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) {
			t.Fatalf("Memory: %v; SQLite: %v", errs[0], errs[1])
		}
		if errs[0] != nil {
			if !oauthErr.MatchString(errs[0].Error()) {
				t.Fatalf("error %q is not one of the known refusals", errs[0])
			}
			return
		}
		for _, s := range []oauthStore{mem, sq} {
			got, err := s.GetOAuthToken(ctx, server, principal)
			if err != nil || !bytes.Equal(got.Data, data) {
				t.Fatalf("%T: GetOAuthToken = %d bytes, %v; want the %d put", s, len(got.Data), err, len(data))
			}
			list, err := s.ListOAuthPrincipals(ctx, server)
			if err != nil || slices.Contains(list, principal) != (principal != "") {
				t.Fatalf("%T: ListOAuthPrincipals = %d principals, %v; want the one put listed iff it is not \"\"", s, len(list), err)
			}
			if err := s.DeleteOAuthToken(ctx, server, principal); err != nil {
				t.Fatalf("%T: DeleteOAuthToken: %v", s, err)
			}
		}
	})
}

// TestOAuth_SQLChecks inserts rows directly, past the puts' checks: the
// tables' own constraints refuse an empty key part, empty or oversized
// data, a missing column and a second row of one key, on both drivers.
func TestOAuth_SQLChecks(t *testing.T) {
	type refusal int
	const (
		ok refusal = iota
		check
		notNull
		unique
		notBlob // SQLite's STRICT: data must be a BLOB
	)
	// What each driver says, so that a row refused for another reason (a
	// typo in the test's SQL) fails the test.
	says := map[string]map[refusal]string{
		"sqlite":   {check: "CHECK constraint failed", notNull: "NOT NULL constraint failed", unique: "UNIQUE constraint failed", notBlob: "cannot store TEXT value in BLOB column"},
		"postgres": {check: "violates check constraint", notNull: "violates not-null constraint", unique: "duplicate key value violates unique constraint"},
	}
	type row struct {
		name  string
		table string
		cols  []any // server, principal or issuer, data, updated_at
		want  refusal
	}
	ts := formatTime(base)
	data := []byte{0, 1, 0xff}
	rows := []row{
		{"token", "oauth_tokens", []any{"a", "alice", data, ts}, ok},
		{"gateway's own token", "oauth_tokens", []any{"a", "", data, ts}, ok},
		{"token of data at the bound", "oauth_tokens", []any{"b", "alice", make([]byte, MaxOAuthData), ts}, ok},
		{"token without server", "oauth_tokens", []any{"", "bob", data, ts}, check},
		{"token of empty data", "oauth_tokens", []any{"a", "bob", []byte{}, ts}, check},
		{"token of data over the bound", "oauth_tokens", []any{"a", "bob", make([]byte, MaxOAuthData+1), ts}, check},
		{"token without data", "oauth_tokens", []any{"a", "bob", nil, ts}, notNull},
		{"token without principal", "oauth_tokens", []any{"a", nil, data, ts}, notNull},
		{"token without time", "oauth_tokens", []any{"a", "bob", data, nil}, notNull},
		{"token twice", "oauth_tokens", []any{"a", "alice", data, ts}, unique},
		{"client", "oauth_clients", []any{"a", "https://as.example.com", data, ts}, ok},
		{"client without server", "oauth_clients", []any{"", "https://as.example.com", data, ts}, check},
		{"client without issuer", "oauth_clients", []any{"a", "", data, ts}, check},
		{"client of empty data", "oauth_clients", []any{"a", "https://b.example.com", []byte{}, ts}, check},
		{"client of data over the bound", "oauth_clients", []any{"a", "https://b.example.com", make([]byte, MaxOAuthData+1), ts}, check},
		{"client without data", "oauth_clients", []any{"a", "https://b.example.com", nil, ts}, notNull},
		{"client twice", "oauth_clients", []any{"a", "https://as.example.com", data, ts}, unique},
	}
	sqliteOnly := []row{
		{"token of text data", "oauth_tokens", []any{"a", "carol", "text", ts}, notBlob},
	}
	for _, d := range []struct {
		name string
		rows []row
		// open opens a new store and returns what runs a statement on it.
		open func(t *testing.T) func(query string, args ...any) error
	}{
		{"sqlite", append(rows, sqliteOnly...), func(t *testing.T) func(string, ...any) error {
			s := openTest(t)
			return func(q string, args ...any) error {
				_, err := s.w.ExecContext(t.Context(), q, args...)
				return err
			}
		}},
		{"postgres", rows, func(t *testing.T) func(string, ...any) error {
			s := openPostgresTest(t)
			return func(q string, args ...any) error {
				q = strings.NewReplacer("?1", "$1", "?2", "$2", "?3", "$3", "?4", "$4").Replace(q)
				_, err := s.pool.Exec(t.Context(), q, args...)
				return err
			}
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			exec := d.open(t)
			for _, r := range d.rows {
				t.Run(r.name, func(t *testing.T) {
					key := "principal"
					if r.table == "oauth_clients" {
						key = "issuer"
					}
					err := exec(`INSERT INTO `+r.table+` (server, `+key+`, data, updated_at) VALUES (?1, ?2, ?3, ?4)`, r.cols...)
					want := says[d.name][r.want]
					switch {
					case r.want == ok && err != nil:
						t.Fatalf("insert failed: %v", err)
					case r.want != ok && err == nil:
						t.Fatal("insert succeeded")
					case r.want != ok && !strings.Contains(err.Error(), want):
						t.Errorf("error %q does not mention %q", err, want)
					}
				})
			}
		})
	}
}

// TestOAuth_SQLiteUsesKey checks SQLite's plans: a server's principals are
// read from the primary key, in its order, with no sort.
func TestOAuth_SQLiteUsesKey(t *testing.T) {
	s := openTest(t)
	for _, query := range []string{
		`SELECT principal FROM oauth_tokens WHERE server = ? AND principal <> '' ORDER BY principal`,
		`SELECT count(*) FROM oauth_tokens WHERE server = ? AND principal <> ''`,
		`DELETE FROM oauth_tokens WHERE server = ?`,
		`DELETE FROM oauth_clients WHERE server = ?`,
	} {
		rows, err := s.r.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, "a")
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, "USING") || !strings.Contains(joined, "sqlite_autoindex_oauth_") || strings.Contains(joined, "USE TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a search of the primary key and no sort", query, joined)
		}
	}
}
