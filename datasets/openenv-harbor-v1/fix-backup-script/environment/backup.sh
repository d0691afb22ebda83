#!/bin/bash
# Copies the configuration files of /app/etc into /app/backup.
mkdir -p /app/backup
for f in $(ls /app/etc | grep .conf); do
  cp /app/etc/$f /app/backup/
done
