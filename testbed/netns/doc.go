// Package netns is the testbed's network-namespace harness: it places
// processes (or Go code) in their own network namespaces joined by veth
// pairs, so that link effects such as injected delays are real, and it removes
// everything it created when the test ends, even when the test fails or
// panics. It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 and, for
// delay loops, iptables.
//
// # Labs, hosts and links
//
//	lab, err := netns.New(t)                 // or netns.New(netns.Named("demo"))
//	srv, err := lab.Host("server")           // namespace ts-<pid>x<seq>-server, lo up
//	cli, err := lab.Host("client")
//	lk, err := lab.Link(cli, srv)            // veth pair, a /30 of the lab's /24
//	ln, err := srv.Listen("tcp4", netip.AddrPortFrom(lk.BAddr, 8080).String())
//	resp, err := cli.HTTPClient().Get("http://" + lk.BAddr.String() + ":8080/")
//	cmd := srv.Command(ctx, "sleep", "10")   // `ip netns exec`, own process group
//	err = srv.Run(func() error { ... })      // Go code on a thread inside the namespace
//
// A lab's id is <pid>x<seq>: the owning process and a per-process counter.
// Its namespaces are ts-<id>-<host>, every iptables rule it adds carries the
// comment Lab.Tag, and its links are numbered from the private
// block 10.213.<seq mod 256>.0/24, one /30 per link (at most MaxLinks links
// and MaxHosts hosts per lab). Veths are created directly inside the two namespaces and
// never exist in the host's namespace; there are no routes beyond the
// connected /30s and no NAT, so a lab's traffic cannot leave its namespaces.
//
// Host.Run locks a fresh goroutine to its OS thread, setns(2)es into the
// namespace, runs the function and setns(2)es back; a thread that cannot be
// restored stays locked, so the Go runtime destroys it. Sockets created inside
// Run stay in the namespace, which is how Listen, DialContext and HTTPClient
// work. Goroutines started inside Run do not inherit the namespace.
//
// # Cleanup
//
// Lab.Close stops the delay loops (rule deleted first, held packets then
// accepted), closes listeners made through the lab, SIGKILLs the process
// groups of commands from Host.Command and any other process left in the
// lab's namespaces (never the test process itself), deletes tagged rules,
// veths and namespaces, and reports what failed. New registers Close with
// t.Cleanup when given a testing.TB, so it runs after t.Fatal and after a
// panic.
//
// A crashed run cannot clean up, so New first calls Sweep, which deletes
// ts-<pid>x<seq>-* namespaces (killing their processes; their veths and rules
// go with them) whose owner pid is gone, is a zombie, or was reused by a
// process that started after the namespace was created; ts-* names without an
// owner are removed once older than StaleAge. Namespaces of live processes are
// never touched, so parallel test processes do not disturb each other.
//
// # Delay loop
//
// Host.StartDelay runs the injector's delay engine (internal/nfqdelay) with a
// constant delay inside the host's namespace: the queue is opened from a
// thread in that namespace (queues are per namespace), then the engine
// appends
//
//	-p tcp [-o IF] [--sport P] [--dport P] -m comment --comment <lab tag> \
//	  -j NFQUEUE --queue-num N --queue-bypass
//
// to OUTPUT (or FORWARD, INPUT) there. The lab tag is the engine's,
// tierscope-inj-<owner>-lab<id>. Every queued packet is held for the delay and
// then accepted; DelayStats is the engine's measurement of the delay each
// packet actually got.
//
// NewChain builds the usual test lab (hosts joined in a line: "client",
// "server" is two hosts and a link) and RequireRoot fails a test that cannot
// create one.
//
// # Safety rules
//
//   - Traffic stays inside namespaces the lab created (and their loopbacks);
//     nothing is routed or NATed to the host's namespace.
//   - The host's namespace is never modified: no interfaces, routes or rules
//     are added there.
//   - Every rule is tagged with the lab and removed by Delay.Stop, by
//     Lab.Close and, after a crash, by Sweep (with its namespace).
//   - Delay loops fail open: --queue-bypass lets packets through when nothing
//     listens on the queue (the process died), the queue's fail-open flag lets
//     them through when the queue is full, and Stop removes the rule before it
//     releases the packets it holds.
//   - Perturbations are bounded: the delay is capped at MaxDelay, every loop
//     runs under a lease (DefaultLease, at most MaxLease) after which it stops
//     itself, and the kernel queue is bounded (MaxQueueLen).
//   - Every external command runs with a timeout.
//
// # iptables backend
//
// The first StartDelay of a process probes the iptables binaries in the delay
// engine's order (nfqdelay.Backends: iptables, iptables-legacy, iptables-nft,
// each kernel backend once), or only $TIERSCOPE_IPTABLES when set. A backend is chosen only
// if a tagged NFQUEUE rule added with it really delivers a packet to a queue
// opened in the namespace and the accept verdict releases it (a TCP connection
// to a listener on the namespace's loopback through a zero-delay loop); an
// accepted rule alone is not trusted. IPTablesBackend reports the choice.
package netns
