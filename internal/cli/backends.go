package cli

import (
	"net/url"
	"path/filepath"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency/boltstore"
	"github.com/idemgate/idemgate/internal/app"
	"github.com/idemgate/idemgate/internal/config"
)

// backends names the live backends of cfg for the startup log line: store,
// fast layer, results and model. Only addresses and names: DSNs and URLs
// are taken apart so that no password, token or key can reach the line
// (the redactor knows the configured secrets, not a password in a URL).
func backends(cfg config.Config) []any {
	return []any{"store", storeOf(cfg), "fast", fastOf(cfg), "results", resultsOf(cfg), "model", modelOf(cfg)}
}

func storeOf(cfg config.Config) string {
	if cfg.MySQLDSN == "" {
		return "embedded " + absPath(filepath.Join(cfg.StateDir, boltstore.FileName))
	}
	c, err := mysql.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return "mysql (MYSQL_DSN does not parse)"
	}
	return "mysql " + c.Addr + "/" + c.DBName
}

func fastOf(cfg config.Config) string {
	if cfg.RedisURL == "" {
		return "none"
	}
	u, err := url.Parse(cfg.RedisURL)
	if err != nil {
		return "redis (REDIS_URL does not parse)"
	}
	return u.Scheme + " " + u.Host + u.Path
}

func resultsOf(cfg config.Config) string {
	if !cfg.UseOSS() {
		return "local " + absPath(app.LocalResultsDir(cfg))
	}
	return "oss bucket " + cfg.OSSBucket + " at " + bareURL(cfg.OSSEndpoint) + " (" + cfg.OSSRegion + ")"
}

func modelOf(cfg config.Config) string {
	if cfg.LLMModel == config.OfflineModel {
		return config.OfflineModel
	}
	return cfg.LLMModel + " at " + bareURL(cfg.LLMBaseURL)
}

// bareURL is raw without user information, query or fragment: where keys hide.
func bareURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(does not parse)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
