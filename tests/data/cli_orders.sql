CREATE DATABASE shop;
USE shop;
CREATE TABLE `orders` (
  `id` BIGINT NOT NULL,
  `amount` DECIMAL(10,2) NOT NULL DEFAULT '0.00',
  `status` ENUM('new','paid','shipped') NOT NULL DEFAULT 'new',
  `note` VARCHAR(64) DEFAULT NULL,
  `blob` VARBINARY(16),
  PRIMARY KEY (`id`)
);
CREATE TABLE `customers` (
  `email` VARCHAR(128) NOT NULL,
  `name` VARCHAR(64),
  UNIQUE KEY `uk_email` (`email`)
);
