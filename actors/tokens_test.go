package actors

import (
	"errors"
	"strings"
	"testing"
)

func TestOwnerTokens(t *testing.T) {
	a, b := NewOwnerToken(), NewOwnerToken()
	if len(a) != 32 || a == b {
		t.Fatalf("tokens must be 32 hex digits and differ: %q %q", a, b)
	}
	owner, err := OwnerOfToken("rt", a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(owner, "rt:") || strings.Contains(owner, a) {
		t.Fatalf("owner %q must be the runtime's and must not contain the token", owner)
	}
	if again, _ := OwnerOfToken("rt", strings.ToUpper(a)); again != owner {
		t.Fatalf("hex case must not make another owner: %q %q", again, owner)
	}
	if other, _ := OwnerOfToken("rt", b); other == owner {
		t.Fatal("two tokens, one owner")
	}
	if other, _ := OwnerOfToken("rt2", a); other == owner {
		t.Fatal("one token, the same owner on two runtimes")
	}
	for _, bad := range []string{"", "abc", a[:31], a + "0", "zz" + a[2:], strings.Repeat("é", 16)} {
		_, err := OwnerOfToken("rt", bad)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%q: %v", bad, err)
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Fatalf("the error quotes the token: %v", err)
		}
	}
}
