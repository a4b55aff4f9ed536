// SPDX-License-Identifier: GPL-2.0
/*
 * Forwards for static inline kernel functions the Rust glue calls (see include/rrxe_shim.h).
 */
#include <linux/cpumask.h>
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#include "rrxe_shim.h"

void rrxe_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void rrxe_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

bool rrxe_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool rrxe_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

/*
 * reg_state leaves NETREG_REGISTERED before NETDEV_UNREGISTER is notified, so a device
 * registered while its netdev was going away can tell it missed the event.
 */
bool rrxe_netdev_is_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

bool rrxe_netdev_is_vlan(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

unsigned int rrxe_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

struct net_device *rrxe_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool rrxe_ib_device_try_get(struct ib_device *ibdev)
{
	return ib_device_try_get(ibdev);
}

unsigned int rrxe_num_possible_cpus(void)
{
	return num_possible_cpus();
}
