/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shim for rrxe: static inline functions and macros of the kernel that Rust cannot call
 * directly. Every function here is a one-line forward; the logic lives in Rust.
 */
#ifndef RRXE_SHIM_H
#define RRXE_SHIM_H

#include <linux/types.h>

struct device;
struct ib_device;
struct net_device;

void rrxe_dev_hold(struct net_device *ndev);
void rrxe_dev_put(struct net_device *ndev);
bool rrxe_netif_running(const struct net_device *ndev);
bool rrxe_netif_carrier_ok(const struct net_device *ndev);
bool rrxe_netdev_is_registered(const struct net_device *ndev);
bool rrxe_netdev_is_vlan(const struct net_device *ndev);
unsigned int rrxe_netdev_mtu(const struct net_device *ndev);
struct net_device *rrxe_netdev_notifier_info_to_dev(void *info);
bool rrxe_ib_device_try_get(struct ib_device *ibdev);
unsigned int rrxe_num_possible_cpus(void);

#endif /* RRXE_SHIM_H */
