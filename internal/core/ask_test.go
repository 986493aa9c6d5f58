package core

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer that reached the caller's reply channel before the runtime's
// actors stopped is the call's outcome: a Take that won an item must return
// it, not ErrClosed with the item dropped. Here the answer arrives and the
// runtime closes before Ask looks, so that both are ready at once (a select
// between them picks at random: half the rounds would drop the answer). The
// same when the caller's ctx ended and it takes the reply it is still owed.
func TestCloseNeverDropsAnAnswerThatArrived(t *testing.T) {
	for round := range 200 {
		done := make(chan struct{})
		var reply chan<- int
		send := func(any) {
			reply <- round
			close(done)
		}
		got, err := Ask(context.Background(), done, send, func(r chan<- int) any { reply = r; return nil }, nil, nil)
		require.NoError(t, err, "round %d: the answer that arrived is the outcome", round)
		require.Equal(t, round, got)
	}
	for round := range 200 {
		done := make(chan struct{})
		var reply chan<- int
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		gaveBack := -1
		send := func(m any) {
			if m == "cancel" {
				reply <- round // the grant won the race with the cancel
				close(done)
			}
		}
		_, err := Ask(ctx, done, send, func(r chan<- int) any { reply = r; return nil }, "cancel", func(v int) { gaveBack = v })
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, round, gaveBack, "round %d: what was won is given back, not dropped", round)
	}
}
