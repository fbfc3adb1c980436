package admin

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
)

// ReloadResult is what a reload of the config file changed.
type ReloadResult struct {
	Added     []string `json:"added"`     // servers new in the file, started
	Removed   []string `json:"removed"`   // servers gone from the file, stopped
	Replaced  []string `json:"replaced"`  // servers whose entry changed, restarted with it
	Unchanged []string `json:"unchanged"` // servers whose entry is the same
	// RestartNeeded names the gateway settings (top-level keys) that
	// changed: they take effect at the next start only.
	RestartNeeded []string `json:"restart_needed"`
	// Problems are the file's problems when it was refused.
	Problems []string `json:"problems,omitempty"`
}

// Reloader re-reads the config file and applies its servers live.
type Reloader func(ctx context.Context) (ReloadResult, error)

// SetReloader sets what POST /admin/reload runs. Without one, the route
// answers that there is nothing to reload.
func (a *API) SetReloader(r Reloader) {
	a.mu.Lock()
	a.reloader = r
	a.mu.Unlock()
}

// reload serves POST /admin/reload.
func (a *API) reload(c echo.Context) error {
	a.mu.Lock()
	r := a.reloader
	a.mu.Unlock()
	if r == nil {
		return fail(c, http.StatusConflict, "this gateway has no config file to reload")
	}
	res, err := r(c.Request().Context())
	if err != nil {
		if len(res.Problems) > 0 {
			probs := make([]problem, 0, len(res.Problems))
			for _, p := range res.Problems {
				probs = append(probs, problem{Field: "config file", Message: p})
			}
			return c.JSON(http.StatusBadRequest, errorBody{Message: err.Error(), Problems: probs})
		}
		return a.internal(c, "reloading the config file", err)
	}
	return c.JSON(http.StatusOK, res.nonNil())
}

// nonNil returns r with empty lists instead of nil ones, so that every
// member is an array in JSON.
func (r ReloadResult) nonNil() ReloadResult {
	for _, p := range []*[]string{&r.Added, &r.Removed, &r.Replaced, &r.Unchanged, &r.RestartNeeded} {
		if *p == nil {
			*p = []string{}
		}
	}
	return r
}
