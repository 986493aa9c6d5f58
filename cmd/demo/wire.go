package main

import (
	"fmt"
	"time"
)

// The names of everything the demo keeps in Redis.
const (
	bankKey      = "demo:bank"        // HASH: field a<k> = balance of account k
	configKey    = "demo:config"      // HASH: version and fields f0..f<n>
	configLock   = "demo:config:lock" // the read-write lock guarding it (a lock's name is a key of its own)
	leaderLock   = "demo:leader"
	queueName    = "demo:jobs" // delayed queue and its blocking queue (one name in Redisson's layout)
	initBalance  = 1000
	configFields = 4
	maxDelay     = 2 * time.Second
	minDelay     = 100 * time.Millisecond
)

func acctField(k int) string    { return fmt.Sprintf("a%d", k) }
func acctLock(k int) string     { return fmt.Sprintf("demo:acct:%d", k) }
func jobLock(k int) string      { return fmt.Sprintf("demo:job:%d", k) }
func jobCounter(k int) string   { return fmt.Sprintf("demo:jobcount:%d", k) }
func cfgField(i int) string     { return fmt.Sprintf("f%d", i) }
func ticketKey(l string) string { return "demo:unsafe-ticket:" + l }

// Kinds of critical sections, as the figures name them.
const (
	kindMulti  = "multilock"
	kindFair   = "fair(remote)"
	kindRead   = "read"
	kindWrite  = "write"
	kindLeader = "leader"
)

var kinds = []string{kindMulti, kindFair, kindRead, kindWrite, kindLeader}

// event is one JSON line a node writes to the orchestrator on stdout. T
// says which; the other fields depend on it:
//
//	ready     Addr (remote address), PID                 the node is up
//	acq       ID, Kind, L (lock names), Tok (their fencing tokens), W (asked), At (held)
//	rel       ID, At, N=1 if the section wrote what it meant to
//	read      At (started), N=1 if torn, Node (writer of the newest field seen)
//	offering  Job, At, D (delay ns)                       about to Offer
//	offered   Job                                         Offer returned nil
//	offerfail Job, Msg                                    Offer failed: the item may or may not be stored
//	dlv       Job, At                                     taken from the blocking queue
//	gauge     N (owners waiting for a lock now)
//	timeout   Kind                                        an acquisition gave up (wait time)
//	switch    N (the peer given up on)                    a remote request timed out or its peer died
//	lost      L, Msg                                      a held lock was reported lost
//	err       Msg                                         something that should not happen
//	stopped                                               the workload stopped (after "stop")
type event struct {
	T    string   `json:"t"`
	Addr string   `json:"addr,omitempty"`
	PID  int      `json:"pid,omitempty"`
	ID   uint64   `json:"id,omitempty"`
	Kind string   `json:"k,omitempty"`
	L    []string `json:"l,omitempty"`
	Tok  []int64  `json:"tok,omitempty"`
	W    int64    `json:"w,omitempty"`
	At   int64    `json:"at,omitempty"`
	N    int64    `json:"n,omitempty"`
	Job  string   `json:"job,omitempty"`
	D    int64    `json:"d,omitempty"`
	Msg  string   `json:"msg,omitempty"`
	Node int      `json:"node,omitempty"`
}

// command is one JSON line the orchestrator writes to a node's stdin.
//
//	peers     Peers: every node's remote address, by node index; start work
//	dead      Node: that node was killed; stop sending to it
//	abdicate  release the leader lock (the victim, when --kill=false)
//	stop      stop the workload (consumers keep taking delayed jobs)
//	quit      stop everything and exit (so does the end of stdin)
type command struct {
	Cmd   string   `json:"cmd"`
	Peers []string `json:"peers,omitempty"`
	Node  int      `json:"node,omitempty"`
}
