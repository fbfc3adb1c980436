package store

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
