// Package netsim builds a small simulated network of Linux network namespaces for benchmarks:
// one hub namespace (where the servers listen) and H host namespaces, each linked to the hub by
// a point-to-point link that delays every packet by a fixed one-way Delay in each direction.
//
// # Call order
//
//  1. [Setup] creates the namespaces and links and starts the delay lines; it needs root and
//     iproute2's ip, and says so when either is missing.
//  2. [Net.HubCommand] and [Net.HostCommand] build commands that run inside a namespace;
//     servers in the hub listen on [Net.HubAddr], which every host reaches through its link.
//  3. [Net.Close] stops every process still running in the namespaces, stops the delay lines
//     and deletes the namespaces. Call it on every path (it is safe to call twice).
//
// # How a link delays
//
// A link is a pair of TUN devices, one in the host namespace and one in the hub, and this
// process copies packets between them, each released Delay after it was read. (tc's netem
// would do the same in the kernel, but it is often not built in, as on the kernels this
// project's CI uses: a delay line over TUN needs only CONFIG_TUN.) Addresses come from
// 10.213.0.0/16 and exist only inside the namespaces Setup made; nothing is added to the
// namespace this process runs in. Namespace names carry this process's id and a random tag,
// so concurrent runs never collide; Setup deletes those of a run whose process is gone.
package netsim
