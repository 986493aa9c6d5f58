package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"
)

// target is how to reach Redis, from the global flags.
type target struct {
	url            string
	urlFrom        string // where url came from, for messages: "--url" or "ACTORLOCK_URL"
	cluster        bool
	sentinelMaster string
	// PEM files for rediss://: a CA to trust besides the system's, and a
	// client certificate for servers that ask for one.
	caCert, cert, key string
}

// usageError is a mistake in the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// secrets are the parts of the URL that must never be printed: its
// password and any password given as a query parameter.
func secrets(raw string) []string {
	var out []string
	if u, err := url.Parse(raw); err == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
		}
		for k, vs := range u.Query() {
			if strings.Contains(strings.ToLower(k), "password") {
				for _, v := range vs {
					if v != "" {
						out = append(out, v, url.QueryEscape(v))
					}
				}
			}
		}
	}
	return out
}

// scrub removes every secret from msg.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// connect parses the URL as the flags say and returns a client that has
// answered a PING, so that a wrong address or password shows up here, with
// a message that never contains the password.
func connect(ctx context.Context, t target) (redis.UniversalClient, error) {
	if t.url == "" {
		return nil, usageError{"no Redis given: pass --url redis://[user:password@]host:port[/db] (or rediss:// for TLS), or set ACTORLOCK_URL"}
	}
	hide := secrets(t.url)
	u, err := url.Parse(t.url)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included, and
		// even its reason may quote part of it: say only what to fix.
		return nil, usageError{"invalid " + t.from() + ": not a URL of the form redis://[user:password@]host:port[/db] (percent-encode special characters in the password)"}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, usageError{fmt.Sprintf("invalid %s: scheme %q, want redis:// or rediss:// (TLS)", t.from(), scrub(u.Scheme, hide))}
	}
	if t.cluster && t.sentinelMaster != "" {
		return nil, usageError{"--cluster and --sentinel-master exclude each other"}
	}
	if u.Scheme != "rediss" && t.caCert+t.cert+t.key != "" {
		return nil, usageError{"--cacert, --cert and --key are for TLS: use a rediss:// URL"}
	}
	var rdb redis.UniversalClient
	switch {
	case t.cluster:
		opts, err := redis.ParseClusterURL(t.url)
		if err != nil {
			return nil, usageError{"invalid " + t.from() + ": " + scrub(err.Error(), hide)}
		}
		if err := t.tlsFiles(opts.TLSConfig); err != nil {
			return nil, err
		}
		rdb = redis.NewClusterClient(opts)
	case t.sentinelMaster != "":
		// The URL names the Sentinels (more with ?addr=host:port); its
		// password is the Sentinels', the master's goes in ?password=.
		opts, err := redis.ParseFailoverURL(t.url)
		if err != nil {
			return nil, usageError{"invalid " + t.from() + ": " + scrub(err.Error(), hide)}
		}
		if err := t.tlsFiles(opts.TLSConfig); err != nil {
			return nil, err
		}
		opts.MasterName = t.sentinelMaster
		rdb = redis.NewFailoverClient(opts)
	default:
		opts, err := redis.ParseURL(t.url)
		if err != nil {
			return nil, usageError{"invalid " + t.from() + ": " + scrub(err.Error(), hide)}
		}
		if err := t.tlsFiles(opts.TLSConfig); err != nil {
			return nil, err
		}
		rdb = redis.NewClient(opts)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		where := u.Host
		if isAuthError(err) {
			return nil, fmt.Errorf("authentication refused by %s: check the user and password in %s (%s)", where, t.from(), scrub(err.Error(), hide))
		}
		return nil, fmt.Errorf("cannot reach Redis at %s: %s", where, scrub(err.Error(), hide))
	}
	return rdb, nil
}

// from names where the URL came from, for messages.
func (t target) from() string {
	if t.urlFrom == "" {
		return "--url"
	}
	return t.urlFrom
}

// tlsFiles adds --cacert, --cert and --key to the TLS configuration that
// go-redis made for a rediss:// URL.
func (t target) tlsFiles(cfg *tls.Config) error {
	if cfg == nil {
		return nil
	}
	if t.caCert != "" {
		pem, err := os.ReadFile(t.caCert)
		if err != nil {
			return usageError{"--cacert: " + err.Error()}
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return usageError{fmt.Sprintf("--cacert: no PEM certificate in %s", t.caCert)}
		}
		cfg.RootCAs = pool
	}
	if (t.cert == "") != (t.key == "") {
		return usageError{"--cert and --key go together"}
	}
	if t.cert != "" {
		c, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return usageError{"--cert/--key: " + err.Error()}
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return nil
}

func isAuthError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "invalid username-password"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// scriptClient is the client the force-unlock scripts run through: on a
// cluster with sharded pub/sub, which actorlock runtimes use by default
// there (Redis 7 and later), they must announce with SPUBLISH to be heard.
func scriptClient(ctx context.Context, rdb redis.UniversalClient) (scripts.Client, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb, nil
	}
	info, err := cc.Do(ctx, "command", "info", "spublish").Slice()
	if err != nil {
		return nil, fmt.Errorf("asking the cluster whether it has sharded pub/sub: %w", err)
	}
	if len(info) == 1 && info[0] != nil {
		return scripts.Sharded{UniversalClient: rdb}, nil
	}
	return rdb, nil
}
