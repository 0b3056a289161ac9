-- Example schema for avro-registry-sink: two databases, four tables.
-- Exercises a composite primary key, a table keyed only by a NOT NULL unique key, every type family
-- (DECIMAL, BIGINT UNSIGNED, BIT, ENUM/SET, JSON, temporal types with fsp, binary strings) and
-- nullable columns with defaults.

/*!40101 SET NAMES utf8mb4 */;

CREATE DATABASE IF NOT EXISTS `shop` DEFAULT CHARACTER SET utf8mb4;
USE `shop`;

-- Keyed only by a NOT NULL unique key: that key becomes the Kafka key (TiCDC's handle key).
CREATE TABLE `customers` (
  `code` VARCHAR(16) NOT NULL COMMENT 'public customer code',
  `email` VARCHAR(128) DEFAULT NULL,
  `name` VARCHAR(64) NOT NULL DEFAULT '',
  `tier` ENUM('basic','silver','gold') NOT NULL DEFAULT 'basic',
  `tags` SET('vip','newsletter','beta') DEFAULT 'newsletter',
  `signup_date` DATE NOT NULL,
  `preferred_time` TIME DEFAULT NULL,
  `balance` DOUBLE DEFAULT 0,
  `avatar_hash` VARBINARY(16) DEFAULT NULL,
  UNIQUE KEY `uk_code` (`code`),
  UNIQUE KEY `uk_email` (`email`),          -- nullable: cannot be the handle key
  KEY `idx_name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `orders` (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `customer_code` VARCHAR(16) NOT NULL,
  `amount` DECIMAL(12,2) NOT NULL DEFAULT '0.00',
  `discount` DECIMAL(5,4) DEFAULT 0.05,
  `status` ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  `flags` BIT(10) NOT NULL DEFAULT b'0000000001',
  `created_at` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updated_at` TIMESTAMP(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6),
  `note` TEXT,
  `attrs` JSON,
  PRIMARY KEY (`id`),
  KEY `idx_customer` (`customer_code`)
) ENGINE=InnoDB AUTO_INCREMENT=1001 DEFAULT CHARSET=utf8mb4;

-- Composite primary key; the Kafka key has both columns, in table column order.
CREATE TABLE `order_items` (
  `order_id` BIGINT UNSIGNED NOT NULL,
  `line_no` SMALLINT UNSIGNED NOT NULL,
  `sku` CHAR(12) NOT NULL,
  `qty` INT NOT NULL DEFAULT 1,
  `unit_price` DECIMAL(10,2) NOT NULL,
  `weight_kg` FLOAT DEFAULT NULL,
  `gift_wrap` BOOL NOT NULL DEFAULT FALSE,
  PRIMARY KEY (`order_id`, `line_no`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE DATABASE IF NOT EXISTS `crm`;
USE `crm`;

CREATE TABLE `events` (
  `id` BIGINT UNSIGNED NOT NULL,
  `kind` VARCHAR(32) NOT NULL DEFAULT 'click',
  `payload` VARBINARY(64) DEFAULT x'00',
  `raw` BLOB,
  `token` BINARY(16) DEFAULT NULL,
  `label` VARCHAR(32) BINARY DEFAULT NULL,
  `score` DOUBLE(8,3) DEFAULT NULL,
  `occurred_at` TIMESTAMP(3) NOT NULL DEFAULT '2024-01-01 00:00:00.000',
  `day` DATE GENERATED ALWAYS AS (CAST(`occurred_at` AS DATE)) STORED,
  `hour` TINYINT GENERATED ALWAYS AS (HOUR(`occurred_at`)) VIRTUAL,
  `year` YEAR DEFAULT 2024,
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
