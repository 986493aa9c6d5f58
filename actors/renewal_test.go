package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRenewOrder(t *testing.T) {
	var o renewOrder
	list := func() (names []string) {
		for e := o.head; e != nil; e = e.next {
			names = append(names, e.name)
		}
		return names
	}
	e := func(name string) *renewEntry { return &renewEntry{renewKey: renewKey{name: name}} }
	a, b, c, d := e("a"), e("b"), e("c"), e("d")
	for _, x := range []*renewEntry{a, b, c, d} {
		o.pushBack(x)
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, list())
	o.remove(a) // renewed: to the back
	o.pushBack(a)
	assert.Equal(t, []string{"b", "c", "d", "a"}, list())
	o.remove(c)
	o.remove(a)
	assert.Equal(t, []string{"b", "d"}, list())
	assert.Same(t, d, o.tail)
	o.remove(b)
	o.remove(d)
	assert.Nil(t, o.head)
	assert.Nil(t, o.tail)
}
